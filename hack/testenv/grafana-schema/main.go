// Checks Grafana dashboard JSON files against Grafana's dashboard schema, as the Grafana Foundation SDK generates it
// from the schema Grafana itself is built on: a strict decode (an unknown field, a field of the wrong type or a
// missing required field is an error), panel options and field config decoded by the panel's type, then the SDK's
// own Validate. Prints "OK <file>" per valid file, the errors otherwise, and exits 1 on any error.
//
//	grafana-schema FILE...
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grafana-schema FILE...")
		os.Exit(2)
	}
	// The panel types (timeseries, stat, table, heatmap, state-timeline, bar gauge, ...) and the query types, so
	// that each panel's options and field config are decoded strictly by its type.
	plugins.RegisterDefaultPlugins()
	invalid := false
	for _, file := range os.Args[1:] {
		raw, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var d dashboard.Dashboard
		if err := d.UnmarshalJSONStrict(raw); failed(err) {
			fmt.Printf("INVALID %s (decode): %v\n", file, err)
			invalid = true
			continue
		}
		if err := d.Validate(); failed(err) {
			fmt.Printf("INVALID %s (validate): %v\n", file, err)
			invalid = true
			continue
		}
		fmt.Printf("OK %s: %d panels\n", file, len(d.Panels))
	}
	if invalid {
		os.Exit(1)
	}
}

// failed says whether the SDK reported an error: its generated code returns its error list even when empty (a nil
// cog.BuildErrors in a non-nil error), which is no error.
func failed(err error) bool {
	var list cog.BuildErrors
	if errors.As(err, &list) {
		return len(list) > 0
	}
	return err != nil
}
