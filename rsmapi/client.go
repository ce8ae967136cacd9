package rsmapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// Client calls the endpoint's tools' routes (GET /v1/status, GET
// /v1/segments/{topic}/{partition}) and its health check, for tierd's
// own tools. It is not the plugin: that is Java (kafka-rsm/).
type Client struct {
	base  string // http(s)://host:port
	token string
	hc    *http.Client
}

// NewClient returns a client of the endpoint at base (http:// or
// https://host:port) with the token; tc, when not nil, is its TLS config.
func NewClient(base, token string, tc *tls.Config) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &Client{base: base, token: token, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Close releases the client's connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// get answers GET path decoded into v. Errors: transport errors; an
// answer that is not 200, with its error and reason.
func (c *Client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e errorBody
		if json.Unmarshal(body, &e) == nil && e.Reason != "" {
			return fmt.Errorf("rsm endpoint %s: %d %s: %s", c.base, resp.StatusCode, e.Reason, e.Error)
		}
		return fmt.Errorf("rsm endpoint %s: %s", c.base, resp.Status)
	}
	return json.Unmarshal(body, v)
}

// Status returns the endpoint's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.get(ctx, "/v1/status", &st)
	return st, err
}

// Rows returns the catalogue's rows of one partition, by start offset.
func (c *Client) Rows(ctx context.Context, tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error) {
	var a RowsAnswer
	err := c.get(ctx, fmt.Sprintf("/v1/segments/%s/%d", tp.Topic, tp.Partition), &a)
	return a.Rows, err
}

// Health returns nil when the endpoint answers its health check ready,
// else why not.
func (c *Client) Health(ctx context.Context) error {
	var h healthAnswer
	return c.get(ctx, "/v1/health", &h)
}
