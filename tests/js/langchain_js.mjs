// A LangChain.js retrieval chain (retriever → prompt → chat model → parser) traced by
// OpenInference's LangChain instrumentation, exporting over OTLP/HTTP. Run as
// `node tests/js/langchain_js.mjs rag-chain ENDPOINT MODEL_URL`. The retriever ranks the
// knowledge base through the scripted server, whose chat completions are the model.
import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain";
import * as CallbackManagerModule from "@langchain/core/callbacks/manager";
import { Document } from "@langchain/core/documents";
import { StringOutputParser } from "@langchain/core/output_parsers";
import { ChatPromptTemplate } from "@langchain/core/prompts";
import { BaseRetriever } from "@langchain/core/retrievers";
import { RunnablePassthrough, RunnableSequence } from "@langchain/core/runnables";
import { ChatOpenAI } from "@langchain/openai";

import { askEachQuestion, finish, search, tracerProvider } from "./common.mjs";

const [variant, endpoint, modelUrl] = process.argv.slice(2);
const { provider, roots } = tracerProvider("langchain-js-openinference", endpoint);
const instrumentation = new LangChainInstrumentation();
instrumentation.setTracerProvider(provider);
instrumentation.manuallyInstrument(CallbackManagerModule);

class KnowledgeBase extends BaseRetriever {
  lc_namespace = ["tests", "retrievers"];

  async _getRelevantDocuments(query) {
    return (await search(modelUrl, query)).map(
      (d) => new Document({ id: d.id, pageContent: d.content, metadata: { source: d.id } }),
    );
  }
}

const prompt = ChatPromptTemplate.fromMessages([
  ["system", "Answer only from the context:\n{context}"],
  ["human", "{question}"],
]);
const chain = RunnableSequence.from([
  {
    context: new KnowledgeBase().pipe((docs) => docs.map((d) => d.pageContent).join("\n\n")),
    question: new RunnablePassthrough(),
  },
  prompt,
  new ChatOpenAI({ model: "scripted", apiKey: "scripted", configuration: { baseURL: modelUrl } }),
  new StringOutputParser(),
]);

if (variant !== "rag-chain") throw new Error(`unknown variant ${variant}`);
await askEachQuestion(modelUrl, (question) => chain.invoke(question));
await finish(provider, roots);
