// execd stands in for OpenSandbox's execd (opensandbox/execd), which cannot
// be pulled here. It keeps the part of its contract the webhook relies on:
// the binary is /execd in its image, bootstrap.sh starts it in the
// background of the sandbox's main container, and it answers HTTP on port
// 44772 (GET /ping). Its answer reports what it sees: its identity, its
// effective capabilities and the sandbox id from its environment.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"sandbox-webhook/tests/image/node/internal/report"
)

const addr = ":44772"

func main() {
	report.Setup("execd")
	http.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"status":      "pong",
			"identity":    report.Identity(),
			"capEff":      report.CapEff(),
			"sandboxId":   os.Getenv("OPENSANDBOX_ID"),
			"execdEnvVar": os.Getenv("EXECD"),
		})
	})
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
		s := <-signals
		log.Printf("%v: exiting", s)
		os.Exit(0)
	}()
	log.Printf("stand-in started: %s, CapEff %s, listening on %s", report.Identity(), report.CapEff(), addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}
