package outboxfx

import (
	"fmt"
	"log/slog"

	outbox "github.com/go-outbox/outbox/core"
	"github.com/go-outbox/outbox/outboxhttp"
	"go.uber.org/fx"
)

// Probes provides the liveness and readiness probes of a data source's
// Client (outboxhttp.NewProbes) as an *outboxhttp.Probes with the data
// source's name tag, its readiness held to cfg's thresholds; without a
// Logger in cfg, the container's *slog.Logger (if any) gets the probes'
// database errors. Mount them on the service's HTTP server, apart from
// the admin handler:
//
//	outboxfx.Probes("orders", outboxhttp.ReadyConfig{MaxPollAge: time.Minute}),
//	fx.Invoke(fx.Annotate(func(mux *http.ServeMux, p *outboxhttp.Probes) {
//		mux.Handle("GET /healthz", p.Liveness())
//		mux.Handle("GET /readyz", p.Readiness())
//	}, fx.ParamTags(``, outboxfx.NameTag("orders")))),
//
// An invalid cfg makes the app fail to start with an error wrapping
// outbox.ErrInvalidConfig.
func Probes(dataSource string, cfg outboxhttp.ReadyConfig) fx.Option {
	if err := cfg.Validate(); err != nil {
		return fx.Invoke(func() error {
			return fmt.Errorf("outboxfx: probes of data source %q: %w", displayName(dataSource), err)
		})
	}
	tag := NameTag(dataSource)
	return fx.Provide(fx.Annotate(func(c *outbox.Client, log *slog.Logger) (*outboxhttp.Probes, error) {
		if cfg.Logger == nil && log != nil {
			cfg.Logger = log.With("outbox_ds", displayName(dataSource))
		}
		return outboxhttp.NewProbes(c, cfg)
	}, fx.ParamTags(tag, `optional:"true"`), fx.ResultTags(tag)))
}
