// A Spring AI 2.0 RAG service as users write one, on Spring Boot 4: a ChatClient with a QuestionAnswerAdvisor (top 2)
// over a SimpleVectorStore, OpenAI chat and embedding models (pointed at the test's scripted
// OpenAI-compatible server by spring.ai.openai.base-url), Micrometer tracing bridged to
// OpenTelemetry, spans and log records over OTLP/HTTP (management.otlp.*.endpoint).
//
// Properties: rag.kb (a JSON file {"kb": {uri: text}, "questions": [...]}); rag.store:
// "observed" (the store built with the observation registry) or "hand" (built without it, as
// most tutorials do); rag.advisor: "qa" (QuestionAnswerAdvisor) or "rag"
// (RetrievalAugmentationAdvisor with a VectorStoreDocumentRetriever). The content switches are
// Spring AI's own properties, given on the command line. rag.handlers=true declares the five
// content handlers itself: on Boot 4, Spring AI 2.0's observation auto-configuration looks
// for the Tracer bean before Boot defines it and declares none of them, whatever the
// switches say (spring-ai issue 5641).
//
// It indexes the knowledge base, asks each question and prints a JSON line per question
// (question, trace_id, response, sources: the retrieved texts), then one with the number of
// traces it sent.
package rag.monitor.springai;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.tracing.Tracer;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.context.Context;
import io.opentelemetry.instrumentation.logback.appender.v1_0.OpenTelemetryAppender;
import io.opentelemetry.sdk.trace.ReadWriteSpan;
import io.opentelemetry.sdk.trace.ReadableSpan;
import io.opentelemetry.sdk.trace.SpanProcessor;
import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.ai.chat.client.ChatClient;
import org.springframework.ai.chat.client.ChatClientResponse;
import org.springframework.ai.chat.client.advisor.api.Advisor;
import org.springframework.ai.chat.client.advisor.vectorstore.QuestionAnswerAdvisor;
import org.springframework.ai.chat.client.observation.ChatClientCompletionObservationHandler;
import org.springframework.ai.chat.client.observation.ChatClientObservationContext;
import org.springframework.ai.chat.client.observation.ChatClientPromptContentObservationHandler;
import org.springframework.ai.chat.observation.ChatModelCompletionObservationHandler;
import org.springframework.ai.chat.observation.ChatModelObservationContext;
import org.springframework.ai.chat.observation.ChatModelPromptContentObservationHandler;
import org.springframework.ai.observation.TracingAwareLoggingObservationHandler;
import org.springframework.ai.vectorstore.observation.VectorStoreObservationContext;
import org.springframework.ai.vectorstore.observation.VectorStoreQueryResponseObservationHandler;
import org.springframework.ai.document.Document;
import org.springframework.ai.embedding.EmbeddingModel;
import org.springframework.ai.rag.advisor.RetrievalAugmentationAdvisor;
import org.springframework.ai.rag.retrieval.search.VectorStoreDocumentRetriever;
import org.springframework.ai.vectorstore.SearchRequest;
import org.springframework.ai.vectorstore.SimpleVectorStore;
import org.springframework.beans.factory.InitializingBean;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.CommandLineRunner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

@SpringBootApplication
public class RagApp {

    /** The traces the app's spans belong to, and the last one begun by a root span. */
    static final Set<String> TRACES = ConcurrentHashMap.newKeySet();
    static volatile String lastRoot = "";

    public static void main(String[] args) {
        SpringApplication.run(RagApp.class, args).close(); // closing flushes both exporters
        System.out.println("{\"traces\": " + TRACES.size() + "}");
        // RetrievalAugmentationAdvisor's own task executor keeps threads that would hold the
        // JVM up.
        System.exit(0);
    }

    @Bean
    InitializingBean logAppender(OpenTelemetry openTelemetry) {
        return () -> OpenTelemetryAppender.install(openTelemetry);
    }

    /** Watches the spans the app exports (the test is told how many traces to wait for). */
    @Bean
    SpanProcessor traceCounter() {
        return new SpanProcessor() {
            @Override
            public void onStart(Context parent, ReadWriteSpan span) {
                TRACES.add(span.getSpanContext().getTraceId());
                if (!span.toSpanData().getParentSpanContext().isValid()) {
                    lastRoot = span.getSpanContext().getTraceId();
                }
            }

            @Override
            public boolean isStartRequired() {
                return true;
            }

            @Override
            public void onEnd(ReadableSpan span) {}

            @Override
            public boolean isEndRequired() {
                return false;
            }
        };
    }

    /** The workaround for spring-ai issue 5641: the five content handlers, each given the Tracer. */
    @Configuration
    @ConditionalOnProperty("rag.handlers")
    static class ContentHandlers {
        @Bean
        TracingAwareLoggingObservationHandler<ChatModelObservationContext> chatModelPrompt(Tracer tracer) {
            return new TracingAwareLoggingObservationHandler<>(new ChatModelPromptContentObservationHandler(), tracer);
        }

        @Bean
        TracingAwareLoggingObservationHandler<ChatModelObservationContext> chatModelCompletion(Tracer tracer) {
            return new TracingAwareLoggingObservationHandler<>(new ChatModelCompletionObservationHandler(), tracer);
        }

        @Bean
        TracingAwareLoggingObservationHandler<ChatClientObservationContext> chatClientPrompt(Tracer tracer) {
            return new TracingAwareLoggingObservationHandler<>(new ChatClientPromptContentObservationHandler(), tracer);
        }

        @Bean
        TracingAwareLoggingObservationHandler<ChatClientObservationContext> chatClientCompletion(Tracer tracer) {
            return new TracingAwareLoggingObservationHandler<>(new ChatClientCompletionObservationHandler(), tracer);
        }

        @Bean
        TracingAwareLoggingObservationHandler<VectorStoreObservationContext> vectorStoreResponse(Tracer tracer) {
            return new TracingAwareLoggingObservationHandler<>(new VectorStoreQueryResponseObservationHandler(), tracer);
        }
    }

    @Bean
    CommandLineRunner ask(
            ChatClient.Builder chat,
            EmbeddingModel embeddings,
            ObservationRegistry registry,
            @Value("${rag.kb}") String kb,
            @Value("${rag.store:observed}") String store,
            @Value("${rag.advisor:qa}") String advisor) {
        return args -> {
            ObjectMapper json = new ObjectMapper();
            JsonNode in = json.readTree(new File(kb));
            SimpleVectorStore vectors = "hand".equals(store)
                    ? SimpleVectorStore.builder(embeddings).build()
                    : SimpleVectorStore.builder(embeddings).observationRegistry(registry).build();
            Map<String, String> texts = new TreeMap<>();
            in.get("kb").fields().forEachRemaining(e -> texts.put(e.getKey(), e.getValue().asText()));
            List<Document> documents = new ArrayList<>();
            texts.forEach((uri, text) -> documents.add(new Document(text, Map.of("source", uri))));
            vectors.add(documents);

            SearchRequest top2 = SearchRequest.builder().topK(2).build();
            Advisor rag = "rag".equals(advisor)
                    ? RetrievalAugmentationAdvisor.builder()
                            .documentRetriever(VectorStoreDocumentRetriever.builder()
                                    .vectorStore(vectors).topK(2).build())
                            .build()
                    : QuestionAnswerAdvisor.builder(vectors).searchRequest(top2).build();
            String key = "rag".equals(advisor)
                    ? RetrievalAugmentationAdvisor.DOCUMENT_CONTEXT
                    : QuestionAnswerAdvisor.RETRIEVED_DOCUMENTS;
            ChatClient client = chat.defaultAdvisors(rag).build();
            for (JsonNode q : in.get("questions")) {
                String question = q.asText();
                ChatClientResponse response = client.prompt().user(question).call().chatClientResponse();
                List<String> sources = new ArrayList<>();
                Object found = response.context().get(key);
                if (found instanceof List<?> list) {
                    for (Object d : list) {
                        sources.add(((Document) d).getText());
                    }
                }
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("question", question);
                line.put("trace_id", lastRoot);
                line.put("response", response.chatResponse().getResult().getOutput().getText());
                line.put("sources", sources);
                System.out.println(json.writeValueAsString(line));
            }
        };
    }
}
