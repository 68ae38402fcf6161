// A Vercel AI SDK agent whose retrieval is a `searchKb` tool, traced by the SDK's own
// telemetry (`experimental_telemetry`), exporting over OTLP/HTTP. Run as
// `node tests/js/vercel_ai.mjs VARIANT ENDPOINT MODEL_URL`, VARIANT
// - `generate`: generateText with the tool, content recorded (the default once enabled);
// - `stream`: streamText with the tool;
// - `no-content`: generateText with recordInputs and recordOutputs off: no text in any span.
// The model is the scripted OpenAI-compatible server (chat completions) at MODEL_URL.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

import { askEachQuestion, finish, search, tracerProvider } from "./common.mjs";

const [variant, endpoint, modelUrl] = process.argv.slice(2);
const { provider, roots } = tracerProvider(`vercel-ai-${variant}`, endpoint);
const model = createOpenAI({ baseURL: modelUrl, apiKey: "scripted" }).chat("scripted");
const telemetry =
  variant === "no-content"
    ? { isEnabled: true, recordInputs: false, recordOutputs: false }
    : { isEnabled: true };
const tools = {
  searchKb: tool({
    description: "Search the knowledge base.",
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => search(modelUrl, query),
  }),
};

async function ask(question) {
  const call = {
    model,
    system: "Answer from the knowledge base.",
    prompt: question,
    tools,
    stopWhen: stepCountIs(3),
    experimental_telemetry: telemetry,
  };
  if (variant === "stream") {
    const result = streamText(call);
    return await result.text;
  }
  return (await generateText(call)).text;
}

await askEachQuestion(modelUrl, ask);
await finish(provider, roots);
