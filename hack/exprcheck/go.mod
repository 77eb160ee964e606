// The expression oracle of rollgate's tests: github.com/expr-lang/expr at the
// version Kargo v1.11.2's go.mod requires (hack/versions.env EXPR_LANG_VERSION).
module rollgate.dev/hack/exprcheck

go 1.24.9

require github.com/expr-lang/expr v1.17.8
