// Package dashboard serves a running job's metrics over HTTP: one live web
// page (gorun --dashboard), its JSON and server-sent event feeds, and
// /metrics in Prometheus's text format; and it draws the job's summary.svg
// for --metrics-dir (WriteSummarySVG). It reads everything through a
// metrics.Source and never writes to it.
//
// # Routes
//
//   - /              the page: one HTML file with inline CSS and script, drawing
//     its charts as SVG itself (no chart library, nothing fetched from
//     elsewhere, so it works offline and adds no dependency to vendor and
//     keep up to date; the charts it needs are lines over steps, bars and
//     a grid of cells, a few hundred lines of script)
//   - /api/snapshot  the Source's Snapshot as JSON (values that are not
//     finite numbers are null)
//   - /events        server-sent events: "update" with a metrics.Update as
//     JSON, "resync" when this client fell behind and should read
//     /api/snapshot again, "end" when the Source closed
//   - /metrics       Prometheus text format 0.0.4: per rank, the latest value
//     of every series and the rank's step, step time, communication share,
//     link traffic and dropped points, labelled with rank and host
//
// # Access
//
// An address whose host is a loopback IP or "localhost", or empty, is
// loopback: the server binds there and serves without a token, but only
// to requests whose Host names a loopback address (a page elsewhere that
// rebinds its DNS name to 127.0.0.1 gets 403). Any other address needs a
// token: Config.Token, or 32 random bytes in hex when empty. A request
// carries it as ?token= (the page then sets an HttpOnly, SameSite=Strict
// cookie and drops it from the address), as that cookie, or as
// "Authorization: Bearer TOKEN" (for Prometheus); without it the answer
// is 401.
//
// # Never in the way of the job
//
// The server caps its connections (Config.MaxConns; one more is closed at
// once with 503) and its event streams (Config.MaxStreams; 503), times out
// requests whose header is slow to come, and gives every stream a write
// deadline, so a reader that stops reading is dropped. The Source never
// blocks on a subscriber (its contract); a stream that misses updates
// sends "resync".
package dashboard
