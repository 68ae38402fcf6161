// What the JavaScript apps share, as tests/frameworks/apps/framework_apps.py does for the Python ones: the
// OTLP/HTTP (protobuf) tracer provider, the knowledge base's ranking and questions (served
// by the scripted model server, tests/frameworks/apps/openai_server.py, so that every app's tool ranks the
// same way), and one JSON line per question for the test.
import { trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

// Remembers the trace id of every root span that ended (index builds and the like count).
class RootSpans {
  constructor() {
    this.traceIds = [];
  }
  onStart() {}
  onEnd(span) {
    if (!span.parentSpanContext) this.traceIds.push(span.spanContext().traceId);
  }
  forceFlush() {
    return Promise.resolve();
  }
  shutdown() {
    return Promise.resolve();
  }
}

export function tracerProvider(service, endpoint) {
  const roots = new RootSpans();
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [roots, new BatchSpanProcessor(new OTLPTraceExporter({ url: endpoint }))],
  });
  provider.register(); // the frameworks trace with the global provider
  return { provider, roots };
}

export async function search(modelUrl, query) {
  const found = await fetch(`${modelUrl}/kb/search?query=${encodeURIComponent(query)}`);
  return found.json();
}

export async function questions(modelUrl) {
  return (await fetch(`${modelUrl}/kb/questions`)).json();
}

function report(traceId, question, response, sources) {
  console.log(JSON.stringify({ trace_id: traceId, question, response, sources }));
}

// Ask each question under an app span (`POST /ask`) and report what came back, with the
// documents the tool returned for it.
export async function askEachQuestion(modelUrl, ask) {
  const tracer = trace.getTracer("app");
  for (const question of await questions(modelUrl)) {
    const [traceId, response] = await tracer.startActiveSpan(
      "POST /ask",
      { attributes: { "http.route": "/ask" } },
      async (span) => {
        try {
          return [span.spanContext().traceId, await ask(question)];
        } finally {
          span.end();
        }
      },
    );
    const sources = (await search(modelUrl, question)).map((d) => d.content);
    report(traceId, question, response, sources);
  }
}

// Flush every span, then tell the test how many traces the app sent in all.
export async function finish(provider, roots) {
  await provider.shutdown();
  console.log(JSON.stringify({ traces: roots.traceIds.length }));
}
