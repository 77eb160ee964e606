// exprcheck is the oracle for rollgate's Kargo-expression checks
// (docs/verification.md "Kargo expressions in verification args").
//
// It reads JSON lines {"template": "...", "vars": [{"name", "value"}]} on stdin and
// writes one JSON line per input: how Kargo v1.11.2 would evaluate that Stage
// verification arg value with expr-lang (this module's version). Kargo's own module is
// not on the module proxy, so the parts of it that decide the answer are restated here:
// the template scan and result rules of pkg/expressions/json_templates.go, the
// environment and option list of pkg/controller/stages/regular_stages.go (ctx.project,
// ctx.stage, vars, the functions of pkg/expressions/function with their declared
// signatures). Functions that read the cluster compile with their real signatures and
// answer "unevaluable" when run.
//
// Output: {"compiles": bool, "error": "...", "evaluated": bool, "value": "...",
// "isString": bool}. compiles=false means expr-lang (or Kargo's scan) rejects the
// template; evaluated=false means the run needed something only a cluster has.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
)

type input struct {
	Template string `json:"template"`
	Project  string `json:"project"`
	Stage    string `json:"stage"`
	Vars     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"vars"`
}

type output struct {
	Compiles  bool   `json:"compiles"`
	Error     string `json:"error,omitempty"`
	Evaluated bool   `json:"evaluated"`
	Value     string `json:"value"`
	IsString  bool   `json:"isString"`
}

var errUnevaluable = errors.New("unevaluable: needs the cluster")

// The kargoapi types the freight functions return, with their Go field names (expr-lang
// resolves members by Go field name), so member access type-checks as in Kargo.
type FreightOrigin struct{ Kind, Name string }
type GitCommit struct{ RepoURL, ID, Branch, Tag, Message, Author, Committer string }
type DiscoveredCommit struct {
	ID, Branch, Tag, Subject, Author, Committer string
}
type Image struct {
	RepoURL, Tag, Digest string
	Annotations          map[string]string
}
type DiscoveredImageReference struct {
	Tag, Digest string
	Annotations map[string]string
}
type Chart struct{ RepoURL, Name, Version string }
type ArtifactReference struct {
	ArtifactType, SubscriptionName, Version string
	Metadata                                map[string]any
}
type Version struct{}

func (Version) Major() uint64      { return 0 }
func (Version) Minor() uint64      { return 0 }
func (Version) Patch() uint64      { return 0 }
func (Version) Prerelease() string { return "" }
func (Version) Metadata() string   { return "" }
func (Version) Original() string   { return "" }
func (Version) String() string     { return "" }

func unevaluable(...any) (any, error) { return nil, errUnevaluable }

func fn(name string, types ...any) expr.Option { return expr.Function(name, unevaluable, types...) }

// kargoOptions are the functions Kargo declares for verification args, in its order:
// DataOperations, FreightOperations, UtilityOperations, then EvaluateTemplate's four.
func kargoOptions() []expr.Option {
	return []expr.Option{
		fn("configMap", new(func(name string) map[string]string)),
		fn("sharedConfigMap", new(func(name string) map[string]string)),
		fn("secret", new(func(name string) map[string]string)),
		fn("sharedSecret", new(func(name string) map[string]string)),
		fn("freightMetadata", new(func(freightRefName string) map[string]any)),
		fn("stageMetadata", new(func(stageName string) map[string]any)),
		fn("warehouse", new(func(name string) FreightOrigin)),
		fn("commitFrom", new(func(repoURL string, origin FreightOrigin) GitCommit),
			new(func(repoURL string) GitCommit)),
		fn("imageFrom", new(func(repoURL string, origin FreightOrigin) Image),
			new(func(repoURL string) Image)),
		fn("chartFrom", new(func(repoURL string, chartName string, origin FreightOrigin) Chart),
			new(func(repoURL string, chartName string) Chart),
			new(func(repoURL string, origin FreightOrigin) Chart),
			new(func(repoURL string) Chart)),
		fn("artifactFrom", new(func(name string, origin FreightOrigin) ArtifactReference),
			new(func(name string) ArtifactReference)),
		fn("freightMetadata", new(func(freightRefName string) map[string]any)),
		fn("semverDiff", new(func(ver1Str, ver2Str string) string)),
		fn("semverParse", new(func(verStr string) *Version)),
		expr.Function("quote", quote, new(func(any) string)),
		expr.Function("unsafeQuote", unsafeQuote, new(func(any) string)),
		fn("asYAML", new(func(any) string)),
		expr.Function("asJSON", asJSON, new(func(any) string)),
	}
}

func quote(a ...any) (any, error) {
	if s, ok := a[0].(string); ok {
		return fmt.Sprintf("%q", s), nil
	}
	return unsafeQuote(a...)
}

func unsafeQuote(a ...any) (any, error) {
	b, err := json.Marshal(a[0])
	if err != nil {
		return nil, err
	}
	return fmt.Sprintf(`"%s"`, b), nil
}

func asJSON(a ...any) (any, error) {
	b, err := json.MarshalIndent(a[0], "", "  ")
	if err != nil {
		return nil, err
	}
	return fmt.Sprintf("\"%s\n\"", b), nil
}

var delimiters = [][2]string{{"${{", "}}"}, {"${%", "%}"}}

// next is Kargo's nextExpression.
func next(t string) (before, expression, after string, err error) {
	var delim *[2]string
	start := -1
	for i := range delimiters {
		if j := strings.Index(t, delimiters[i][0]); j >= 0 && (start < 0 || j < start) {
			start, delim = j, &delimiters[i]
		}
	}
	if delim == nil {
		return "", "", t, nil
	}
	from := start + len(delim[0])
	end := strings.Index(t[from:], delim[1])
	if end < 0 {
		return "", "", "", fmt.Errorf("unclosed expression: expected %q but reached end of template", delim[1])
	}
	return t[:start], t[from : from+end], t[from+end+len(delim[1]):], nil
}

// evaluate is Kargo's EvaluateTemplate with compilation separated from running, so a
// compile error is told apart from a run that needs the cluster.
func evaluate(t string, env map[string]any, compileOnly bool) (any, error, bool) {
	hasDelim := false
	for _, d := range delimiters {
		hasDelim = hasDelim || strings.Contains(t, d[0])
	}
	if !hasDelim {
		return t, nil, true
	}
	var result strings.Builder
	var runErr error
	for {
		before, expression, after, err := next(t)
		if err != nil {
			return nil, err, false
		}
		result.WriteString(before)
		if expression == "" {
			result.WriteString(after)
			break
		}
		program, err := expr.Compile(expression, kargoOptions()...)
		if err != nil {
			return nil, err, false
		}
		if !compileOnly && runErr == nil {
			value, err := expr.Run(program, env)
			if err != nil {
				runErr = err
			} else if s, ok := value.(string); ok {
				result.WriteString(s)
			} else if b, err := json.Marshal(value); err != nil {
				runErr = err
			} else {
				result.Write(b)
			}
		}
		t = after
	}
	if compileOnly || runErr != nil {
		return nil, runErr, true
	}
	return resultRules(result.String()), nil, true
}

// resultRules is the tail of Kargo's EvaluateTemplate.
func resultRules(result string) any {
	removedNewline := false
	if strings.HasSuffix(result, "\n") {
		result, removedNewline = strings.TrimSuffix(result, "\n"), true
	}
	if len(result) > 1 && strings.HasPrefix(result, `"`) && strings.HasSuffix(result, `"`) {
		result = result[1 : len(result)-1]
		if removedNewline {
			result += "\n"
		}
		return result
	}
	if f, err := strconv.ParseFloat(result, 64); err == nil {
		return f
	}
	if b, err := strconv.ParseBool(result); err == nil {
		return b
	}
	var v any
	if err := json.Unmarshal([]byte(result), &v); err == nil {
		return v
	}
	if removedNewline {
		result += "\n"
	}
	return result
}

func check(in input) output {
	if _, err, compiles := evaluate(in.Template, nil, true); !compiles {
		return output{Error: err.Error()}
	}
	vars := map[string]any{}
	env := map[string]any{"ctx": map[string]any{"project": in.Project, "stage": in.Stage}}
	if len(in.Vars) > 0 {
		env["vars"] = vars
	}
	for _, v := range in.Vars {
		value, err, compiles := evaluate(v.Value, env, false)
		if !compiles || err != nil {
			return output{Compiles: true, Error: fmt.Sprintf("evaluate variable %q: %v", v.Name, err)}
		}
		vars[v.Name] = value
	}
	value, err, _ := evaluate(in.Template, env, false)
	if err != nil {
		return output{Compiles: true, Error: err.Error(), Evaluated: !errors.Is(err, errUnevaluable)}
	}
	out := output{Compiles: true, Evaluated: true}
	if s, ok := value.(string); ok {
		out.Value, out.IsString = s, true
	} else {
		out.Value = fmt.Sprintf("%T", value)
	}
	return out
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	for scanner.Scan() {
		var in input
		if err := json.Unmarshal(scanner.Bytes(), &in); err != nil {
			fmt.Fprintf(os.Stderr, "exprcheck: bad input line: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(check(in)); err != nil {
			os.Exit(1)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "exprcheck: %v\n", err)
		os.Exit(2)
	}
}
