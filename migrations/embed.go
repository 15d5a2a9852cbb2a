// Package migrations holds the forward-only SQL migrations, embedded into the binary.
package migrations

import "embed"

// FS holds every NNNN_verb_noun.sql file; db.Migrate applies them in name order.
//
//go:embed *.sql
var FS embed.FS
