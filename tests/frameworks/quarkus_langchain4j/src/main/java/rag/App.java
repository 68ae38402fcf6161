package rag;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.langchain4j.data.document.Metadata;
import dev.langchain4j.data.segment.TextSegment;
import dev.langchain4j.model.embedding.EmbeddingModel;
import dev.langchain4j.rag.content.Content;
import dev.langchain4j.store.embedding.inmemory.InMemoryEmbeddingStore;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.QuarkusApplication;
import io.quarkus.runtime.annotations.QuarkusMain;
import jakarta.inject.Inject;
import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

// A Quarkus LangChain4j RAG service run from the command line: it indexes the knowledge
// base (its embedding call a trace of its own), asks each question under a span of the
// app's own, prints a JSON line per question (question, trace_id, response, sources: the
// retrieved texts) and a last one with the number of traces it sent.
//
// Usage: java -jar quarkus-run.jar KB.json, KB.json being {"kb": {uri: text}, "questions": [...]};
// the model's URL and the OTLP endpoint come from Quarkus's configuration.
@QuarkusMain
public class App implements QuarkusApplication {
    @Inject
    Assistant assistant;

    @Inject
    EmbeddingModel embeddingModel;

    @Inject
    InMemoryEmbeddingStore<TextSegment> store;

    @Inject
    Tracer tracer;

    public static void main(String... args) {
        Quarkus.run(App.class, args);
    }

    @Override
    @SuppressWarnings("unchecked")
    public int run(String... args) throws Exception {
        var mapper = new ObjectMapper();
        Map<String, Object> in = mapper.readValue(new File(args[0]), Map.class);
        var kb = new TreeMap<String, String>((Map<String, String>) in.get("kb"));
        var segments = new ArrayList<TextSegment>();
        kb.forEach((uri, text) -> segments.add(TextSegment.from(text, Metadata.from("source", uri))));
        store.addAll(embeddingModel.embedAll(segments).content(), segments);
        var questions = (List<String>) in.get("questions");
        for (String question : questions) {
            Span span = tracer.spanBuilder("ask").startSpan();
            var line = new LinkedHashMap<String, Object>();
            try (Scope ignored = span.makeCurrent()) {
                var result = assistant.chat(question);
                var sources = new ArrayList<String>();
                for (Content content : result.sources()) {
                    sources.add(content.textSegment().text());
                }
                line.put("question", question);
                line.put("trace_id", span.getSpanContext().getTraceId());
                line.put("response", result.content());
                line.put("sources", sources);
            } finally {
                span.end();
            }
            System.out.println(mapper.writeValueAsString(line));
        }
        // The indexing trace (one embeddings call: the store is filled in one request) and one
        // per question.
        System.out.println(mapper.writeValueAsString(Map.of("traces", 1 + questions.size())));
        return 0;
    }
}
