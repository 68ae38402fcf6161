// A Mastra agent whose retrieval is a `searchKb` tool, traced by Mastra's own observability
// and exported by its OTLP exporter (`@mastra/otel-exporter`, OTLP/HTTP protobuf). Run as
// `node tests/js/mastra.mjs agent ENDPOINT MODEL_URL`. Mastra starts a trace of its own per
// agent run (its id is on the result), so each question's trace is the agent's. The model is
// the scripted OpenAI-compatible server (chat completions) at MODEL_URL.
import { createOpenAI } from "@ai-sdk/openai";
import { Mastra } from "@mastra/core";
import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { Observability } from "@mastra/observability";
import { OtelExporter } from "@mastra/otel-exporter";
import { z } from "zod";

import { questions, search } from "./common.mjs";

const [variant, endpoint, modelUrl] = process.argv.slice(2);
const exporter = new OtelExporter({
  provider: { custom: { endpoint, protocol: "http/protobuf" } },
});
const searchKb = createTool({
  id: "searchKb",
  description: "Search the knowledge base.",
  inputSchema: z.object({ query: z.string() }),
  execute: async ({ query }) => search(modelUrl, query),
});
const agent = new Agent({
  id: "kb-agent",
  name: "kb-agent",
  instructions: "Answer from the knowledge base.",
  model: createOpenAI({ baseURL: modelUrl, apiKey: "scripted" }).chat("scripted"),
  tools: { searchKb },
});
const mastra = new Mastra({
  agents: { agent },
  observability: new Observability({
    configs: { otel: { serviceName: `mastra-${variant}`, exporters: [exporter] } },
  }),
});

let traces = 0;
for (const question of await questions(modelUrl)) {
  const result = await mastra.getAgent("agent").generate(question, { maxSteps: 3 });
  traces += 1;
  const sources = (await search(modelUrl, question)).map((d) => d.content);
  console.log(
    JSON.stringify({ trace_id: result.traceId, question, response: result.text, sources }),
  );
}
await mastra.shutdown?.();
await exporter.shutdown();
console.log(JSON.stringify({ traces }));
