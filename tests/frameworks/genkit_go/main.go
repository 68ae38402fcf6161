// A Genkit Go RAG service as users write one: a flow that retrieves the two closest
// documents with a localvec retriever and answers with Generate over them. Its model and
// embedder call the test's scripted OpenAI-compatible server over HTTP; Genkit's spans go
// through the global OpenTelemetry tracer provider, set before genkit.Init, to the real
// OTLP/HTTP exporter.
//
// Usage: genkit-rag KB.json MODEL_URL OTLP_TRACES_URL STORE_DIR, KB.json being {"kb": {uri: text}, "questions": [...]};
// it indexes the knowledge base (a trace of its own), asks each question and prints a JSON
// line per question (question, trace_id, response, sources: the retrieved texts) and a last
// one with the number of traces it sent.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/localvec"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

type answer struct {
	Question string   `json:"question"`
	TraceID  string   `json:"trace_id"`
	Response string   `json:"response"`
	Sources  []string `json:"sources"`
}

type input struct {
	KB        map[string]string `json:"kb"`
	Questions []string          `json:"questions"`
}

func post(ctx context.Context, url string, body any, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// chat sends the request's messages to the server's Chat Completions endpoint.
func chat(modelURL string) ai.ModelFunc {
	return func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		messages := []map[string]string{}
		for _, m := range req.Messages {
			role := string(m.Role)
			if role == "model" {
				role = "assistant"
			}
			messages = append(messages, map[string]string{"role": role, "content": m.Text()})
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		body := map[string]any{"model": "scripted", "messages": messages}
		if err := post(ctx, modelURL+"/chat/completions", body, &out); err != nil {
			return nil, err
		}
		if len(out.Choices) == 0 {
			return nil, fmt.Errorf("no choice")
		}
		return &ai.ModelResponse{
			Request:      req,
			Message:      ai.NewModelTextMessage(out.Choices[0].Message.Content),
			FinishReason: ai.FinishReasonStop,
			Usage: &ai.GenerationUsage{
				InputTokens: out.Usage.Prompt, OutputTokens: out.Usage.Completion,
			},
		}, nil
	}
}

// embed sends each document's text to the server's Embeddings endpoint.
func embed(modelURL string) ai.EmbedderFunc {
	return func(ctx context.Context, req *ai.EmbedRequest) (*ai.EmbedResponse, error) {
		texts := []string{}
		for _, d := range req.Input {
			var parts []string
			for _, p := range d.Content {
				parts = append(parts, p.Text)
			}
			texts = append(texts, strings.Join(parts, ""))
		}
		var out struct {
			Data []struct {
				Embedding []float32 `json:"embedding"`
			} `json:"data"`
		}
		body := map[string]any{"model": "scripted-embedding", "input": texts}
		if err := post(ctx, modelURL+"/embeddings", body, &out); err != nil {
			return nil, err
		}
		res := &ai.EmbedResponse{}
		for _, e := range out.Data {
			res.Embeddings = append(res.Embeddings, &ai.Embedding{Embedding: e.Embedding})
		}
		return res, nil
	}
}

func run(ctx context.Context, path, modelURL, tracesURL, storeDir string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return err
	}
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL))
	if err != nil {
		return err
	}
	res := resource.NewSchemaless(semconv.ServiceName("genkit-go-rag"))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	defer provider.Shutdown(context.Background())
	otel.SetTracerProvider(provider)

	g := genkit.Init(ctx)
	model := genkit.DefineModel(g, "scripted/chat", &ai.ModelOptions{
		Label: "scripted chat", Supports: &ai.ModelSupports{Multiturn: true, SystemRole: true},
	}, chat(modelURL))
	embedder := genkit.DefineEmbedder(g, "scripted/embedding", nil, embed(modelURL))
	store, retriever, err := localvec.DefineRetriever(
		g, "kb", localvec.Config{Dir: storeDir, Embedder: embedder}, nil)
	if err != nil {
		return err
	}
	uris := make([]string, 0, len(in.KB))
	for uri := range in.KB {
		uris = append(uris, uri)
	}
	sort.Strings(uris)
	docs := []*ai.Document{}
	for _, uri := range uris {
		docs = append(docs, ai.DocumentFromText(in.KB[uri], map[string]any{"source": uri}))
	}
	if err := localvec.Index(ctx, docs, store); err != nil {
		return err
	}
	flow := genkit.DefineFlow(g, "ragFlow", func(ctx context.Context, question string) (answer, error) {
		found, err := genkit.Retrieve(ctx, g, ai.WithRetriever(retriever),
			ai.WithTextDocs(question), ai.WithConfig(&localvec.RetrieverOptions{K: 2}))
		if err != nil {
			return answer{}, err
		}
		resp, err := genkit.Generate(ctx, g, ai.WithModel(model),
			ai.WithSystem("Answer the question from the documents you are given."),
			ai.WithPrompt(question), ai.WithDocs(found.Documents...))
		if err != nil {
			return answer{}, err
		}
		out := answer{
			Question: question,
			TraceID:  trace.SpanContextFromContext(ctx).TraceID().String(),
			Response: resp.Text(),
			Sources:  []string{},
		}
		for _, d := range found.Documents {
			out.Sources = append(out.Sources, d.Content[0].Text)
		}
		return out, nil
	})
	for _, question := range in.Questions {
		out, err := flow.Run(ctx, question)
		if err != nil {
			return err
		}
		line, _ := json.Marshal(out)
		fmt.Println(string(line))
	}
	if err := provider.ForceFlush(ctx); err != nil {
		return err
	}
	fmt.Printf("{\"traces\": %d}\n", len(in.Questions)+1) // the indexing trace and one per question
	return nil
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: genkit-rag KB.json MODEL_URL OTLP_TRACES_URL STORE_DIR")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
