// noop-webhook is the baseline rollgate's admission overhead is measured against
// (docs/benchmarks.md "Stage create overhead"): what any webhook costs the API server,
// with no decision in it. It answers every AdmissionReview v1 with an allow for the
// request's uid.
//
// It serves as rollgate's webhook is served (docs/components.md "TLS"): TLS 1.2 and 1.3
// only, TLS 1.2 with ECDHE and AEAD suites only, and HTTP/1.1 only (no h2 offered): the
// API server speaks HTTP/1.1 to a webhook behind a Service, and rollgate's server
// offers nothing else. Like rollgate it refuses a body over 8 MiB with a 413.
//
// Usage: noop-webhook -bind 127.0.0.1:8443 -tls-cert-file tls.crt -tls-key-file tls.key
package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

const maxBodyBytes = 8 << 20 // rollgate's body limit (webhook/config.py MAX_BODY_BYTES)

// review holds only what the answer needs: the request's uid.
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID string `json:"uid"`
	} `json:"request"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
}

type answer struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Response   response `json:"response"`
}

func allow(w http.ResponseWriter, r *http.Request) {
	var in review
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&in)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, "request body is too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil || in.Request == nil:
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	out, err := json.Marshal(answer{APIVersion: in.APIVersion, Kind: in.Kind,
		Response: response{UID: in.Request.UID, Allowed: true}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// tlsConfig is rollgate's (webhook/server/tls.py harden): TLS 1.2 minimum, TLS 1.2
// suites ECDHE with AES-GCM or ChaCha20-Poly1305 only; TLS 1.3 suites are Go's (all
// AEAD); HTTP/1.1 only.
func tlsConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
			tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		NextProtos: []string{"http/1.1"},
	}
}

func main() {
	bind := flag.String("bind", "0.0.0.0:8443", "HOST:PORT to listen on")
	certFile := flag.String("tls-cert-file", "", "serving certificate (PEM)")
	keyFile := flag.String("tls-key-file", "", "its key (PEM)")
	flag.Parse()
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "noop-webhook: %v\n", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", allow)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	server := &http.Server{
		Addr:              *bind,
		Handler:           mux,
		TLSConfig:         tlsConfig(cert),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       75 * time.Second, // rollgate's keep-alive
		// A non-nil empty map: no HTTP/2, whatever the client offers.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	log.Printf("noop-webhook serving on %s", *bind)
	log.Fatal(server.ListenAndServeTLS("", ""))
}
