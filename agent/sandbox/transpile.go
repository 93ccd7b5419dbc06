package sandbox

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// The model's code is the body of an async function, so `return` gives the
// result and `await` works anywhere. The wrapper adds exactly one line
// before the code; positions are shifted back by wrapperLines.
const (
	wrapperPrefix = "(async () => {\n"
	wrapperSuffix = "\n})()"
	wrapperLines  = 1
	// sourceName is the file name positions refer to.
	sourceName = "code.ts"
)

// program is transpiled code ready for goja.
type program struct {
	js string // JavaScript with an inline source map to the wrapped TypeScript
}

// transpile turns TypeScript into JavaScript goja can run. Syntax errors
// come back as *Error with positions in the model's code.
func transpile(code string) (program, *Error) {
	res := api.Transform(wrapperPrefix+code+wrapperSuffix, api.TransformOptions{
		Loader:     api.LoaderTS,
		Target:     api.ES2017,
		Sourcemap:  api.SourceMapExternal,
		Sourcefile: sourceName,
		LogLevel:   api.LogLevelSilent,
		Charset:    api.CharsetUTF8,
	})
	if len(res.Errors) > 0 {
		return program{}, syntaxError(res.Errors)
	}
	js := string(res.Code) + "\n//# sourceMappingURL=data:application/json;base64," +
		base64.StdEncoding.EncodeToString(res.Map) + "\n"
	return program{js: js}, nil
}

// maxReportedErrors bounds how many esbuild errors reach the model.
const maxReportedErrors = 5

func syntaxError(msgs []api.Message) *Error {
	e := &Error{Kind: KindSyntax}
	var more []string
	for i, m := range msgs {
		if i == maxReportedErrors {
			more = append(more, fmt.Sprintf("%d more errors", len(msgs)-i))
			break
		}
		line, col := 0, 0
		if m.Location != nil {
			line, col = codePosition(m.Location.Line, m.Location.Column+1)
		}
		if i == 0 {
			e.Line, e.Column = line, col
			e.Message = "syntax error: " + m.Text
			continue
		}
		if line > 0 {
			more = append(more, fmt.Sprintf("line %d, column %d: %s", line, col, m.Text))
		} else {
			more = append(more, m.Text)
		}
	}
	if len(more) > 0 {
		e.Message += " (also " + strings.Join(more, "; ") + ")"
	}
	return e
}

// codePosition maps a 1-based line/column in the wrapped source to the
// model's code; positions inside the wrapper clamp to the code's edges.
func codePosition(line, col int) (int, int) {
	line -= wrapperLines
	if line < 1 {
		return 1, 1
	}
	if col < 1 {
		col = 1
	}
	return line, col
}
