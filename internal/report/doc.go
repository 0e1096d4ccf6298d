// Package report turns an aggregate.Snapshot into what users read and
// script against: a human table (WriteText) or NDJSON (WriteJSON, whose
// format is documented field by field in docs/json.md and only ever grows).
//
// Reports are pure functions of a snapshot, options and a Symbolizer, so the
// same snapshot always renders the same bytes: live runs, replayed runs and
// tests share one code path.
package report
