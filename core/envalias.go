package outbox

import (
	"strconv"
	"strings"
)

// EnvAlias is an environment variable that Config.LoadEnv accepts in place
// of a knob's own: the names of DEV-PLAN-017, the outbox specification a
// deployment may already be configured for (OUTBOX_RELAY_POLL_INTERVAL,
// OUTBOX_CLEANER_RETENTION, …). An alias sets its knob as the knob's own
// variable would; setting both is an error. Only the names are taken, not
// that plan's defaults (a 1 s poll, batches of 100, a 60 s lock, 25
// attempts): set them to keep those.
type EnvAlias struct {
	// Env is the variable after its prefix, e.g. "RELAY_LOCK_TTL".
	Env string
	// Knob is the knob it sets (see Knobs), Doc how.
	Knob string
	Doc  string

	value func(v string) (string, error) // the knob's value for v; "" sets nothing
}

// EnvAliases returns every alias LoadEnv accepts.
func EnvAliases() []EnvAlias { return append([]EnvAlias(nil), envAliases...) }

var envAliases = []EnvAlias{
	sameAlias("RELAY_POLL_INTERVAL", "PollInterval"),
	sameAlias("RELAY_BATCH_SIZE", "PollBatchSize"),
	sameAlias("RELAY_LOCK_TTL", "Lease"),
	sameAlias("RELAY_MAX_ATTEMPTS", "MaxAttempts"),
	sameAlias("CLEANER_RETENTION", "Retention"),
	{Env: "RELAY_ENABLED", Knob: "Mode", Doc: "false sets Mode writer-only (nothing is delivered, events are kept); true leaves Mode alone",
		value: switchAlias("", ModeWriterOnly.String())},
	{Env: "CLEANER_ENABLED", Knob: "DisablePurge", Doc: "false sets DisablePurge; true leaves it alone",
		value: switchAlias("", "true")},
}

// sameAlias is an alias whose value is its knob's.
func sameAlias(env, knob string) EnvAlias {
	return EnvAlias{Env: env, Knob: knob, Doc: "the same as " + envName(knob),
		value: func(v string) (string, error) { return v, nil }}
}

// switchAlias is an alias of a boolean switch: on (true) sets its knob to
// ifOn, off (false) to ifOff; "" sets nothing.
func switchAlias(ifOn, ifOff string) func(string) (string, error) {
	return func(v string) (string, error) {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return "", configErr("want true or false")
		}
		if on {
			return ifOn, nil
		}
		return ifOff, nil
	}
}

// envAlias returns the alias named key (after the prefix), if there is one.
func envAlias(key string) (EnvAlias, bool) {
	for _, a := range envAliases {
		if a.Env == key {
			return a, true
		}
	}
	return EnvAlias{}, false
}
