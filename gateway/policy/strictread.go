package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"ironcurtain.dev/gateway/strictjson"
)

// The policy artifacts are read the way the original (TypeScript)
// IronCurtain reads them, so the policy the gateway enforces is the one the
// file says to anyone else who reads it: names match exactly (encoding/json
// took "Rules" for "rules"), a name appears once per object (encoding/json
// kept the last), nothing follows the value and strings are valid UTF-8.
// A name no field takes is metadata and ignored, as in the original,
// except where a block is strict (a rule's "if", a conditional roles
// block): there it is an error.

// artifactLimits bound one artifact file (generous: they are the
// operator's files, read once per load).
var artifactLimits = strictjson.Limits{MaxBytes: 64 << 20, MaxDepth: 128, MaxMembers: 1 << 22, MaxElements: 1 << 22, MaxString: 16 << 20}

// decodeExact decodes b into v: names exact, each once, valid UTF-8,
// nothing after the value; names no field takes are ignored.
func decodeExact(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, jsonv2.MatchCaseInsensitiveNames(false),
		jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
}

// strictUnmarshal decodes b into v strictly: checked first
// (strictjson.Check: a name given twice, invalid UTF-8, trailing data),
// then decoded as decodeExact does, and a name no field takes is an error
// naming it (`unknown field "paths.Within"`). An error of a type's own
// decoder keeps its message, with where it was found.
func strictUnmarshal(b []byte, v any) error {
	if err := strictjson.Check(b, artifactLimits); err != nil {
		var je *strictjson.Error
		if errors.As(err, &je) && je.Path != "" {
			return &FileError{Path: pointerPath(je.Path), Err: errors.New(je.Reason)}
		}
		return err
	}
	err := jsonv2.Unmarshal(b, v, jsonv2.MatchCaseInsensitiveNames(false), jsonv2.RejectUnknownMembers(true),
		jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false))
	var me *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jsonv2.ErrUnknownName) && errors.As(err, &me):
		return fmt.Errorf("unknown field %q", pointerPath(string(me.JSONPointer)))
	case errors.As(err, &me) && me.Err != nil && me.JSONPointer != "":
		return &FileError{Path: pointerPath(string(me.JSONPointer)), Err: me.Err}
	case errors.As(err, &me) && me.Err != nil:
		return me.Err
	}
	return err
}

// checkArtifact checks a whole artifact once it has been parsed: a name
// given twice anywhere (also inside what is kept as it is, such as input
// schemas), invalid UTF-8 and trailing data are errors naming where.
func checkArtifact(file string, b []byte) error {
	err := strictjson.Check(b, artifactLimits)
	var je *strictjson.Error
	if errors.As(err, &je) {
		return &FileError{File: file, Path: pointerPath(je.Path), Err: errors.New(je.Reason)}
	}
	return err
}

// pointerPath turns a JSON pointer (/rules/0/if) into the path form of
// load errors (rules[0].if).
func pointerPath(ptr string) string {
	if ptr == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
