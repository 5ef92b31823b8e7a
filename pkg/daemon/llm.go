package daemon

import (
	"fmt"
	"os"

	"github.com/kgstream/kgstream/pkg/llm"
)

// LLMFromEnv is the LLM client KG_LLM_* configures (endpoint, model, key,
// concurrency cap and tokens per minute), adjusted by adjust when not nil;
// nil without KG_LLM_BASE_URL (the offline ways).
func LLMFromEnv(adjust func(*llm.Config)) (*llm.Client, error) {
	cfg, err := llm.ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.BaseURL == "" {
		return nil, nil
	}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring the LLM client: %w", err)
	}
	return c, nil
}
