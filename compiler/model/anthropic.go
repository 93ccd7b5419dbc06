package model

import (
	"context"
	"errors"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"ironcurtain.dev/compiler"
)

const anthropicDefaultEndpoint = "https://api.anthropic.com"

type anthropicModel struct {
	client   anthropic.Client
	name     string
	endpoint string
}

var _ compiler.Model = (*anthropicModel)(nil)

func newAnthropic(cfg Config) *anthropicModel {
	opts := []option.RequestOption{option.WithAPIKey(cfg.APIKey), option.WithRequestTimeout(timeout(cfg))}
	endpoint := anthropicDefaultEndpoint
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
		endpoint = cfg.BaseURL
	}
	if cfg.MaxRetries >= 0 {
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	return &anthropicModel{client: anthropic.NewClient(opts...), name: cfg.Spec.Name, endpoint: endpoint}
}

// Complete sends p to the Messages API and returns the concatenated text
// blocks of the answer.
func (m *anthropicModel) Complete(ctx context.Context, p compiler.Prompt) (compiler.Reply, error) {
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(m.name),
		MaxTokens: int64(maxTokens(p)),
	}
	if p.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: p.System}}
	}
	for _, msg := range p.Messages {
		block := anthropic.NewTextBlock(msg.Content)
		if msg.Role == compiler.Assistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(block))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(block))
		}
	}
	resp, err := m.client.Messages.New(ctx, params)
	if err != nil {
		var apiErr *anthropic.Error
		status := 0
		if errors.As(err, &apiErr) {
			status = apiErr.StatusCode
		}
		return compiler.Reply{}, describe(Anthropic, m.endpoint, status, err)
	}
	var text strings.Builder
	for _, block := range resp.Content {
		if block.Type == "text" {
			text.WriteString(block.Text)
		}
	}
	return compiler.Reply{
		Text:  text.String(),
		Usage: compiler.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens},
	}, nil
}
