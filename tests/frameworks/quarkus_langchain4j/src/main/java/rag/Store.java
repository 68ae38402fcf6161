package rag;

import dev.langchain4j.data.segment.TextSegment;
import dev.langchain4j.store.embedding.inmemory.InMemoryEmbeddingStore;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Produces;

public class Store {
    @Produces
    @ApplicationScoped
    InMemoryEmbeddingStore<TextSegment> store() {
        return new InMemoryEmbeddingStore<>();
    }
}
