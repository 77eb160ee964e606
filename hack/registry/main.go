// The OCI registry of rollgate's test harness: go-containerregistry's pkg/registry (the
// registry `crane registry serve` runs) behind TLS and HTTP basic auth, so that what
// `make publish` pushes and the node's kubelet pulls goes through what a real registry
// asks of them: a certificate the client must trust, and credentials (docs/development.md
// "The registry").
//
//	registry serve -addr 198.18.0.1:5000 -tls-cert F -tls-key F -htpasswd F -data DIR
//	registry htpasswd USER     (password on stdin; prints the bcrypt htpasswd line)
//
// Blobs are files under -data; manifests and tags live in memory, so a restart starts
// empty, as the harness's registry does with each node. Every request without valid
// credentials is answered 401 with a Basic challenge, as distribution's htpasswd auth
// answers it (the /v2/ ping included: clients read the challenge there).
package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"golang.org/x/crypto/bcrypt"
)

const realm = "rollgate test registry"

// users maps a user name to its bcrypt hash, as htpasswd -B writes them.
type users map[string][]byte

func readHtpasswd(path string) (users, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	out := users{}
	scanner := bufio.NewScanner(file)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hash, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(hash, "$2") {
			return nil, fmt.Errorf("%s: %q is not a bcrypt htpasswd line (htpasswd -B)", path, name)
		}
		out[name] = []byte(hash)
	}
	return out, scanner.Err()
}

func (u users) allowed(req *http.Request) bool {
	name, password, ok := req.BasicAuth()
	hash, known := u[name]
	if !ok || !known {
		// Compare anyway, so an unknown user costs what a wrong password costs.
		_ = bcrypt.CompareHashAndPassword([]byte("$2a$10$invalidinvalidinvalidinvalidinvalidinvalidinvalidinv"), []byte(password))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil
}

// authenticated answers 401 with the registry error body to a request without valid
// credentials, and passes the others to next.
func authenticated(u users, next http.Handler, logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(resp http.ResponseWriter, req *http.Request) {
		if !u.allowed(req) {
			logger.Printf("%s %s 401 UNAUTHORIZED", req.Method, req.URL)
			resp.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", realm))
			resp.Header().Set("Content-Type", "application/json")
			resp.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(resp, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		next.ServeHTTP(resp, req)
	})
}

func serve(args []string) error {
	flags := flag.NewFlagSet("serve", flag.ExitOnError)
	addr := flags.String("addr", "127.0.0.1:5000", "host:port to listen on")
	cert := flags.String("tls-cert", "", "serving certificate (PEM)")
	key := flags.String("tls-key", "", "its key (PEM)")
	htpasswd := flags.String("htpasswd", "", "bcrypt htpasswd file of the users allowed")
	data := flags.String("data", "", "directory for the blobs")
	_ = flags.Parse(args)
	if *cert == "" || *key == "" || *htpasswd == "" || *data == "" {
		return errors.New("serve needs -tls-cert, -tls-key, -htpasswd and -data")
	}
	allowed, err := readHtpasswd(*htpasswd)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	handler := registry.New(registry.Logger(logger),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(*data)))
	server := &http.Server{
		Addr:              *addr,
		Handler:           authenticated(allowed, handler, logger),
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
		// HTTP/1.1 only: pkg/registry holds one lock while it reads an upload's body,
		// so over HTTP/2 a client's parallel layer uploads share one connection's flow
		// control window and deadlock (seen with crane push: every upload stalled).
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	logger.Printf("serving on https://%s (%d users, blobs in %s)", *addr, len(allowed), *data)
	return server.ListenAndServeTLS(*cert, *key)
}

func htpasswdLine(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: registry htpasswd USER (password on stdin)")
	}
	password, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(strings.TrimRight(string(password), "\n")), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	fmt.Printf("%s:%s\n", args[0], hash)
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: registry serve|htpasswd ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "htpasswd":
		err = htpasswdLine(os.Args[2:])
	case "version":
		fmt.Println("rollgate test registry (github.com/google/go-containerregistry/pkg/registry)")
	default:
		err = fmt.Errorf("unknown command %q: serve, htpasswd or version", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
}
