package rag;

import dev.langchain4j.service.Result;
import dev.langchain4j.service.SystemMessage;
import io.quarkiverse.langchain4j.RegisterAiService;
import jakarta.enterprise.context.ApplicationScoped;

// An AI service with a system message, the knowledge base's retrieval augmentor and the
// default chat memory; application-scoped, since a command-line app has no request for the
// default scope.
@RegisterAiService(retrievalAugmentor = Augmentor.class)
@ApplicationScoped
public interface Assistant {
    @SystemMessage("You answer questions about the world in one sentence.")
    Result<String> chat(String question);
}
