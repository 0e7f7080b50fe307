// Command etcd-test runs a single-member etcd (go.etcd.io/etcd/server/v3/embed) for allocd's
// tests. It is a module of its own so that the core module, and the allocd binary, never link
// the etcd server; the Makefile builds it to build/etcd-test and passes it to the tests as
// ALLOCD_ETCD_BIN (see internal/etcdtest).
//
//	etcd-test --data-dir DIR --listen-client http://127.0.0.1:0 --listen-peer http://127.0.0.1:0 [--url-file F]
//
// When the member is ready it prints "ready CLIENT-URL" on stdout (port 0 resolved) and, with
// --url-file, writes the URL there (a temporary file renamed into place). It stops on SIGTERM or
// SIGINT, and with --exit-with-stdin also when its standard input reaches end of file, so that a
// test process that dies without cleaning up does not leave a server behind. Restarted on the same --data-dir with
// the same --listen-peer, it comes back with its data.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// version is what --version prints; internal/etcdtest tells this binary from a stock etcd by it.
const version = "allocd etcd-test (etcd server embed v3.7.3)"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-test:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "", "data folder (required)")
	client := flag.String("listen-client", "http://127.0.0.1:2379", "client URL to listen on and advertise (port 0: any free port)")
	peer := flag.String("listen-peer", "http://127.0.0.1:0", "peer URL to listen on and advertise")
	urlFile := flag.String("url-file", "", "file to write the client URL to when ready")
	logLevel := flag.String("log-level", "error", "etcd's log level (debug, info, warn, error, panic, fatal)")
	exitWithStdin := flag.Bool("exit-with-stdin", false, "stop when standard input reaches end of file")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return nil
	}
	if *dataDir == "" {
		return errors.New("--data-dir is required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		return fmt.Errorf("--listen-client: %w", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		return fmt.Errorf("--listen-peer: %w", err)
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = *logLevel
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return errors.New("not ready after 60 s")
	}
	ready := "http://" + e.Clients[0].Addr().String()
	if *urlFile != "" {
		if err := writeFile(*urlFile, ready+"\n"); err != nil {
			e.Close()
			return err
		}
	}
	fmt.Println("ready", ready)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	stdinGone := make(chan struct{})
	if *exitWithStdin {
		go func() {
			io.Copy(io.Discard, bufio.NewReader(os.Stdin))
			close(stdinGone)
		}()
	}
	select {
	case <-stop:
	case <-stdinGone:
	case err := <-e.Err():
		return err
	}
	// A graceful close waits for open client streams; the data is in the WAL already, so a
	// close that takes long is cut short.
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	return nil
}

func writeFile(path, s string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
