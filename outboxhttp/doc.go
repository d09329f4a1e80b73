// Package outboxhttp is the outbox's admin HTTP handler: JSON endpoints for
// the counts per status, the events and the dead letters of one or more
// outboxes, and a small web page on top of them, embedded in the binary (no
// front-end build step). An operator sees what is pending and what went
// DEAD with its last error, reads an event's payload and headers, sees the
// Client's health (its last poll, its routes' circuit breakers, the pauses)
// and the audit trail, and — when an authorizer allows it — replays or
// deletes dead letters, pauses and resumes event types, forces pending
// events to DEAD and skips or deletes events in any status, after a
// confirmation. [NewProbes] serves the liveness and readiness probes apart
// from it.
//
// # Quick start
//
//	h, err := outboxhttp.New(outboxhttp.Config{
//		Sources: []outboxhttp.Source{{Name: "orders", Client: client, Events: store}},
//		AuthorizeRead: func(r *http.Request) error { // default: loopback only
//			if !isStaff(r) {
//				return errors.New("staff only")
//			}
//			return nil
//		},
//		AllowedHosts: []string{"app.example.com"}, // the Host names it is served under
//		Authorize: func(r *http.Request) error {
//			if !isAdmin(r) { // your session, your roles
//				return errors.New("admins only")
//			}
//			return nil
//		},
//	})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/admin/outbox/", http.StripPrefix("/admin/outbox", h))
//
// The page is then at /admin/outbox/. It uses relative URLs only, so it
// works under any prefix and behind any router that strips it.
//
// # Authorization
//
// Without [Config.Authorize] the handler is read-only: the page says so and
// has no buttons, and every replay or delete is refused with 403. With it,
// each replay or delete is first checked against CSRF — it must be a POST
// or DELETE with Content-Type: application/json, which an HTML form cannot
// send and a script of another site cannot send without a CORS preflight
// that this handler never grants, and a browser's Sec-Fetch-Site or Origin
// header must not name another origin ([http.CrossOriginProtection]) — and
// then passed to Authorize; an error refuses it with 403.
//
// Reading — the page, its assets and every endpoint — is guarded by
// [Config.AuthorizeRead], which every request passes first. Without it,
// reads are allowed on direct loopback connections only ([LoopbackOnly]):
// a request from another machine, or relayed by a proxy, reads nothing.
// Behind your own authentication middleware, set it to [AllowAnyone].
//
// # Host check
//
// Before anything else the Host header must name a host the handler
// answers to: a loopback address, "localhost" or a name under
// ".localhost", the address of the server's end of the connection, or an
// entry of [Config.AllowedHosts]. Any other Host — a page of another site
// whose name was made to resolve to this server (DNS rebinding) — is
// refused with 421 Misdirected Request. Behind a proxy that checks Host
// itself, [AnyHost] turns the check off.
//
// # Endpoints
//
// Paths are relative to where the handler is mounted; {source} is a
// [Source]'s Name. Every answer of the API is JSON; every error is
// {"error": "…", "code": "…"} with a 4xx or 5xx status.
//
//	GET    api                               title, read_only, authorized, sources
//	GET    api/{source}/stats                counts per status, oldest pending
//	GET    api/{source}/events               events: ?status= (NEW, RETRY, DONE, DEAD, PENDING; comma-separated)
//	                                         &type= &aggregate= &tenant= &after= (keyset paging) &limit= (1–500, default 50)
//	GET    api/{source}/events/{id}          one event with its headers and payload
//	GET    api/{source}/dead                 DEAD events: ?type= &aggregate= &tenant= &after= &limit=, and how many match
//	POST   api/{source}/dead/{id}/replay     replay one DEAD event
//	POST   api/{source}/dead/replay          {"ids": [...]}: replay these (every one must be DEAD),
//	                                         or {"all": true, "type": "…", "aggregate": "…", "tenant": "…"}: every DEAD event that matches
//	DELETE api/{source}/dead/{id}            delete one DEAD event for good
//	POST   api/{source}/dead/delete          {"ids": [...]}: delete these for good (every one must be DEAD)
//	GET    api/{source}/health               the Client's health: last poll, last error, routes and breakers, pauses, nodes
//	GET    api/{source}/pauses               the stored pauses
//	POST   api/{source}/actions/pause        {"scope": "T" or "*", "reason": "…"}: pause on every instance
//	POST   api/{source}/actions/resume       {"scope": "T"}: remove the pause
//	GET    api/{source}/audit                the audit trail, newest first: ?limit= &before=
//	POST   api/{source}/actions/force-dead   {"ids": [...], "reason": "…"}: pending events to DEAD
//	POST   api/{source}/actions/delete       {"ids": [...], "reason": "…"}: delete events in any status
//	POST   api/{source}/actions/skip-head    {"ids": ["…"], "reason": "…"}: a pending event to DONE, undelivered
//
// {"all": true, "dry_run": true, …} on dead/replay counts what the replay
// would replay, per event type and tenant, and changes nothing. Every
// change is recorded in the outbox's audit trail with the request's
// principal ([Config.Principal]) as its actor.
//
// A replay or delete of ids that are not all DEAD events changes nothing
// and answers 404; a malformed filter, page or body answers 400; a store
// error answers 500 with a message that does not repeat the database's
// error (it may name a host, a user or a table) — [Config.Logger] gets it.
// Replays and deletes are logged too, with the ids and the remote address.
//
// # Probes
//
// [NewProbes] returns a Client's liveness and readiness handlers, for a
// kubelet: no authorizer and no Host check — probes come from the node —
// and no event data in their answers. Liveness is 200 while the Client is
// started; readiness checks its database and the thresholds of a
// [ReadyConfig], answering 503 with the checks that failed.
//
// The repository's docs/admin.md has example answers and a screenshot.
package outboxhttp
