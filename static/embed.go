// Package static holds the dashboard's embedded assets. dist/ is filled at build time from
// package.json (htmx); app.css, app.js, settings.css and settings.js are our own.
package static

import "embed"

// FS is served under /static.
//
//go:embed *.css *.js all:dist
var FS embed.FS
