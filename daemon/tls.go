package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/internal/tlsreload"
)

// tlsHolder loads the certificate when an endpoint uses TLS; nil when none
// does. The start fails on a file that cannot be used.
func tlsHolder(c config.TLS, log *slog.Logger) (*tlsreload.Holder, error) {
	if !c.AnyOn() {
		return nil, nil
	}
	if err := c.ValidateServe(); err != nil {
		return nil, err
	}
	h, err := tlsreload.New(tlsreload.Files{CertFile: c.CertFile, KeyFile: c.KeyFile, ClientCAFile: c.ClientCAFile})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	logCertificate(log, h, "tls: certificate loaded")
	return h, nil
}

// logCertificate logs the certificate's subject and expiry, as a warning
// when it expires within a week.
func logCertificate(log *slog.Logger, h *tlsreload.Holder, msg string) {
	leaf := h.Leaf()
	attrs := []any{"cert_file", h.Files().CertFile, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if time.Until(leaf.NotAfter) < 7*24*time.Hour {
		log.Warn(msg+"; it expires within a week", attrs...)
		return
	}
	log.Info(msg, attrs...)
}

// serverTLS returns the server config of an endpoint in mode m, or nil
// for off (or no holder).
func serverTLS(h *tlsreload.Holder, m string) *tls.Config {
	if h == nil || config.Mode(m) == config.TLSOff {
		return nil
	}
	return h.ServerConfig(config.Mode(m) == config.TLSMTLS)
}

// reloadTLS reads the certificate files again (a part of every config
// reload: SIGHUP, tierd config reload); on an error the endpoints keep the
// certificate they have. A nil holder does nothing.
func reloadTLS(h *tlsreload.Holder, log *slog.Logger) error {
	if h == nil {
		return nil
	}
	if err := h.Reload(); err != nil {
		log.Error("tls: reload failed; keeping the certificate in use", "err", err)
		return err
	}
	logCertificate(log, h, "tls: certificate reloaded")
	return nil
}
