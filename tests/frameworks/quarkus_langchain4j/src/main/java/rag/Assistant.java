package rag;

import dev.langchain4j.service.Result;
import io.quarkiverse.langchain4j.RegisterAiService;
import jakarta.enterprise.context.ApplicationScoped;

// An AI service with the knowledge base's retrieval augmentor and the default chat memory;
// application-scoped, since a command-line app has no request for the default scope.
@RegisterAiService(retrievalAugmentor = Augmentor.class)
@ApplicationScoped
public interface Assistant {
    Result<String> chat(String question);
}
