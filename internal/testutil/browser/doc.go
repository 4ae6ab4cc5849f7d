// Package browser drives a headless Chromium for tests that look at
// gorovod's web pages (the dashboard's): Find locates the browser, or
// skips the test where it is not installed, Start runs it and attaches
// to its page, and a Browser then navigates, evaluates script in the
// page, reloads it and takes screenshots.
//
// It speaks Chromium's DevTools protocol over a WebSocket (RFC 6455)
// that it implements itself, as far as a test needs: this module has no
// WebSocket package, and a test helper should not add one. It is
// imported only by tests, never by the library or its commands.
package browser
