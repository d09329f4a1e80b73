package main

import (
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether f, stdin or stderr, is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// progress shows how far a long command got, on one line of stderr that
// each call rewrites, when stderr is a terminal; elsewhere (a pipe, a log
// file, a script) it prints nothing.
func (c *cli) progress(format string, args ...any) {
	if !c.stderrTTY {
		return
	}
	c.printf(c.stderr, "\r\x1b[K"+format+"…", args...)
	c.progressShown = true
}

// progressEnd clears the progress line, so that what follows starts on a
// clean line.
func (c *cli) progressEnd() {
	if c.progressShown {
		c.printf(c.stderr, "\r\x1b[K")
		c.progressShown = false
	}
}
