package autoapprove

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// maxAnswerBytes bounds the model's answer text that is parsed at all.
const maxAnswerBytes = 8 << 10

// maxReasoningChars bounds the reasoning an answer may carry.
const maxReasoningChars = 2000

// answer is the model's parsed verdict.
type answer struct {
	Verdict   string // "approve", "human" or "deny" (the last is never obeyed)
	Reasoning string
}

// Errors of parseAnswer.
var (
	errMalformed = errors.New("the answer is not the required JSON object")
	errDenied    = errors.New("the model answered deny, which it may not")
)

// parseAnswer reads the model's answer strictly: one JSON object, nothing
// before or after it but white space, with exactly the string members
// "verdict" and "reasoning", each once, verdict being "approve" or "human"
// (lower case). "deny" is reported as errDenied; anything else is
// errMalformed. Only an answer with verdict "approve" approves.
func parseAnswer(text string) (answer, error) {
	if len(text) > maxAnswerBytes || !utf8.ValidString(text) {
		return answer{}, fmt.Errorf("%w: too long or not UTF-8", errMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return answer{}, fmt.Errorf("%w: not an object", errMalformed)
	}
	var a answer
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return answer{}, fmt.Errorf("%w: %v", errMalformed, err)
		}
		key, _ := kt.(string)
		if key != "verdict" && key != "reasoning" {
			return answer{}, fmt.Errorf("%w: unexpected member %q", errMalformed, key)
		}
		if seen[key] {
			return answer{}, fmt.Errorf("%w: member %q twice", errMalformed, key)
		}
		seen[key] = true
		vt, err := dec.Token()
		if err != nil {
			return answer{}, fmt.Errorf("%w: %v", errMalformed, err)
		}
		v, ok := vt.(string)
		if !ok {
			return answer{}, fmt.Errorf("%w: %q is not a string", errMalformed, key)
		}
		if key == "verdict" {
			a.Verdict = v
		} else {
			a.Reasoning = v
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return answer{}, fmt.Errorf("%w: unterminated object", errMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return answer{}, fmt.Errorf("%w: text after the object", errMalformed)
	}
	if !seen["verdict"] || !seen["reasoning"] {
		return answer{}, fmt.Errorf("%w: verdict and reasoning are required", errMalformed)
	}
	if utf8.RuneCountInString(a.Reasoning) > maxReasoningChars {
		return answer{}, fmt.Errorf("%w: reasoning longer than %d characters", errMalformed, maxReasoningChars)
	}
	switch a.Verdict {
	case "approve", "human":
		return a, nil
	case "deny":
		return a, errDenied
	}
	return answer{}, fmt.Errorf("%w: verdict %q is not approve or human", errMalformed, a.Verdict)
}
