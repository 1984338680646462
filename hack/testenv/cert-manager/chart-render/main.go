// Renders templates of cert-manager's Helm chart (deploy/charts/cert-manager in the module) with the chart's
// own values.yaml, as `helm template` would for a release named cert-manager: the install tests take cert-manager's
// webhook configurations from the chart rather than from a copy. Helm itself is not built here (its module would
// move cert-manager's dependency versions); Go's text/template runs the chart's templates and _helpers.tpl with
// the few Sprig functions they use, written below. A function the templates need and this file lacks is an error
// at parse time, and any "<no value>" left in the output is an error too, so a chart change cannot pass unnoticed.
//
//	chart-render <chart dir> <namespace> <version> <template file>...   YAML documents on stdout
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: chart-render <chart dir> <namespace> <version> <template file>...")
		os.Exit(64)
	}
	out, err := render(os.Args[1], os.Args[2], os.Args[3], os.Args[4:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart-render:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func render(chartDir, namespace, version string, files []string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return "", err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": "cert-manager", "Namespace": namespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": "cert-manager", "Version": version, "AppVersion": version},
	}
	root := template.New("chart").Option("missingkey=zero")
	root.Funcs(funcs(root))
	helpers := filepath.Join(chartDir, "templates", "_helpers.tpl")
	if _, err := root.ParseFiles(append([]string{helpers}, qualify(chartDir, files)...)...); err != nil {
		return "", err
	}
	var docs []string
	for _, f := range files {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, filepath.Base(f), data); err != nil {
			return "", err
		}
		if strings.Contains(buf.String(), "<no value>") {
			return "", fmt.Errorf("%s: rendered a missing value:\n%s", f, buf.String())
		}
		docs = append(docs, "---\n# Source: cert-manager/templates/"+filepath.Base(f)+"\n"+strings.TrimLeft(buf.String(), "\n"))
	}
	return strings.Join(docs, "\n") + "\n", nil
}

func qualify(chartDir string, files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Join(chartDir, "templates", f)
	}
	return out
}

// empty is Sprig's notion of an unset value: nil, false, 0, "" or an empty collection.
func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return r.Len() == 0
	case reflect.Bool:
		return !r.Bool()
	case reflect.Int, reflect.Int64, reflect.Int32:
		return r.Int() == 0
	case reflect.Float64, reflect.Float32:
		return r.Float() == 0
	}
	return false
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// funcs are the Sprig and Helm functions the chart's helpers and webhook templates call, with Helm's meaning.
func funcs(root *template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var buf bytes.Buffer
			err := root.ExecuteTemplate(&buf, name, data)
			return buf.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"indent":  indent,
		"quote": func(vs ...any) string {
			q := make([]string, 0, len(vs))
			for _, v := range vs {
				if v != nil {
					q = append(q, fmt.Sprintf("%q", str(v)))
				}
			}
			return strings.Join(q, " ")
		},
		"default": func(d any, given ...any) any {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"required": func(msg string, v any) (any, error) {
			if empty(v) {
				return nil, fmt.Errorf("%s", msg)
			}
			return v, nil
		},
		"fail": func(msg string) (string, error) { return "", fmt.Errorf("%s", msg) },
	}
}
