package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures an in-process NATS JetStream server.
type EmbeddedConfig struct {
	// StoreDir holds JetStream's file store.
	StoreDir string
	// Listen, when set ("127.0.0.1:4223", or "127.0.0.1:-1" for a random
	// port), also serves clients over TCP; otherwise only in-process
	// connections reach the server.
	Listen string
}

// Embedded is an in-process NATS JetStream server.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a JetStream server inside this process and waits
// until it is ready.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("stream: embedded server needs a store directory")
	}
	opts := &server.Options{
		ServerName: "kgstream-embedded",
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoLog:      true,
		NoSigs:     true,
		DontListen: cfg.Listen == "",
	}
	if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("creating embedded NATS server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded NATS server did not become ready")
	}
	return &Embedded{srv: srv}, nil
}

// Connect opens an in-process client connection.
func (e *Embedded) Connect() (*nats.Conn, error) {
	nc, err := nats.Connect("", nats.InProcessServer(e.srv), nats.Name("kgstream-inprocess"))
	if err != nil {
		return nil, fmt.Errorf("connecting in-process: %w", err)
	}
	return nc, nil
}

// ClientURL is the TCP URL when the server listens, "" otherwise.
func (e *Embedded) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

func splitHostPort(addr string) (string, int, error) {
	var host string
	var port int
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			host = addr[:i]
			if _, err := fmt.Sscanf(addr[i+1:], "%d", &port); err != nil {
				return "", 0, fmt.Errorf("stream: bad listen address %q", addr)
			}
			return host, port, nil
		}
	}
	return "", 0, fmt.Errorf("stream: bad listen address %q", addr)
}
