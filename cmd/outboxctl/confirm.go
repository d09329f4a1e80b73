package main

import (
	"bufio"
	"strings"
)

// confirm asks the user to confirm what (an action, such as "delete 3 DEAD
// events of outbox_event for good") on a terminal, unless --yes was given.
// Without --yes and with stdin not a terminal it refuses at once: a script
// must say --yes. Only y or yes confirms.
func (c *cli) confirm(what string) error {
	if c.g.yes {
		return nil
	}
	if !isTerminal(c.stdin) {
		return refusedErr("refusing to %s without confirmation: stdin is not a terminal; pass --yes", what)
	}
	c.printf(c.stderr, "%s? [y/N] ", strings.ToUpper(what[:1])+what[1:])
	answer, err := c.readLine()
	if err != nil {
		return err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return refusedErr("not confirmed; nothing changed")
}

// readLine reads one line of stdin, or gives up when the run's context is
// cancelled (Ctrl-C at the prompt). The read itself cannot be cancelled: on
// cancellation its goroutine is left blocked on the terminal, and the
// process exits right after.
func (c *cli) readLine() (string, error) {
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(c.stdin).ReadString('\n')
		ch <- line{s, err}
	}()
	select {
	case l := <-ch:
		if l.err != nil && l.s == "" {
			return "", refusedErr("no answer (%v); nothing changed", l.err)
		}
		return l.s, nil
	case <-c.ctx.Done():
		c.printf(c.stderr, "\n") // end the prompt's line
		return "", refusedErr("interrupted; nothing changed")
	}
}
