// Tool module: builds a checker of Grafana dashboard JSON against Grafana's dashboard schema (the Grafana
// Foundation SDK's strict decoding and validation), for e2e/lifecycle/grafana-schema.test.ts. Not product code;
// build.sh beside it builds it.
module joinguard.io/hack/testenv/grafana-schema

go 1.26

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
