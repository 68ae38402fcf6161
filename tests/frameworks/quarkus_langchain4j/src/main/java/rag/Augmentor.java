package rag;

import dev.langchain4j.data.segment.TextSegment;
import dev.langchain4j.model.embedding.EmbeddingModel;
import dev.langchain4j.model.input.PromptTemplate;
import dev.langchain4j.rag.DefaultRetrievalAugmentor;
import dev.langchain4j.rag.RetrievalAugmentor;
import dev.langchain4j.rag.content.injector.DefaultContentInjector;
import dev.langchain4j.rag.content.retriever.EmbeddingStoreContentRetriever;
import dev.langchain4j.store.embedding.inmemory.InMemoryEmbeddingStore;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.util.function.Supplier;
import org.eclipse.microprofile.config.inject.ConfigProperty;

// The two closest documents of the in-memory store, put into the user message by
// LangChain4j's content injector: its default template, or (rag.template=custom) one of
// the app's own.
@ApplicationScoped
public class Augmentor implements Supplier<RetrievalAugmentor> {
    static final String CUSTOM =
            "Use only these notes.\n<notes>\n{{contents}}\n</notes>\nQuestion: {{userMessage}}";

    @Inject
    EmbeddingModel embeddingModel;

    @Inject
    InMemoryEmbeddingStore<TextSegment> store;

    @ConfigProperty(name = "rag.template", defaultValue = "default")
    String template;

    @Override
    public RetrievalAugmentor get() {
        var retriever = EmbeddingStoreContentRetriever.builder()
                .embeddingStore(store)
                .embeddingModel(embeddingModel)
                .maxResults(2)
                .build();
        var builder = DefaultRetrievalAugmentor.builder().contentRetriever(retriever);
        if ("custom".equals(template)) {
            builder.contentInjector(DefaultContentInjector.builder()
                    .promptTemplate(PromptTemplate.from(CUSTOM))
                    .build());
        }
        return builder.build();
    }
}
