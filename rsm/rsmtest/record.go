package rsmtest

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Request is what a FaultProxy recorded of one request: its method, URL
// (path and query) and headers, before any fault was applied.
type Request struct {
	Method string
	URL    *url.URL
	Header http.Header
}

// RecordRequests turns recording on (the record so far is kept) or off.
func (p *FaultProxy) RecordRequests(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recording = on
}

// Requests returns the requests recorded so far, in arrival order, and
// clears the record.
func (p *FaultProxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.recorded
	p.recorded = nil
	return out
}

func (p *FaultProxy) record(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recording {
		u := *r.URL
		p.recorded = append(p.recorded, Request{Method: r.Method, URL: &u, Header: r.Header.Clone()})
	}
}

// Op names the S3 operation of a path-style request ("/bucket/key?query"),
// from the method, the path and the query as the S3 API reference defines
// them: PutObject, CreateMultipartUpload, UploadPart,
// CompleteMultipartUpload, AbortMultipartUpload, GetObject, HeadObject,
// DeleteObject, ListParts, CopyObject, ListObjectsV2, ListMultipartUploads,
// HeadBucket, CreateBucket, DeleteObjects and so on; "METHOD path" for
// anything else.
func (r Request) Op() string {
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	object := strings.Contains(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case object && r.Method == http.MethodPut && has("partNumber") && has("uploadId"):
		return "UploadPart"
	case object && r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		return "CopyObject"
	case object && r.Method == http.MethodPut:
		return "PutObject"
	case object && r.Method == http.MethodPost && has("uploads"):
		return "CreateMultipartUpload"
	case object && r.Method == http.MethodPost && has("uploadId"):
		return "CompleteMultipartUpload"
	case object && r.Method == http.MethodDelete && has("uploadId"):
		return "AbortMultipartUpload"
	case object && r.Method == http.MethodDelete:
		return "DeleteObject"
	case object && r.Method == http.MethodGet && has("uploadId"):
		return "ListParts"
	case object && r.Method == http.MethodGet:
		return "GetObject"
	case object && r.Method == http.MethodHead:
		return "HeadObject"
	case !object && r.Method == http.MethodGet && has("uploads"):
		return "ListMultipartUploads"
	case !object && r.Method == http.MethodGet && q.Get("list-type") == "2":
		return "ListObjectsV2"
	case !object && r.Method == http.MethodGet && has("location"):
		return "GetBucketLocation"
	case !object && r.Method == http.MethodGet && len(q) <= 1:
		return "ListObjects"
	case !object && r.Method == http.MethodHead:
		return "HeadBucket"
	case !object && r.Method == http.MethodPut && len(q) == 0:
		return "CreateBucket"
	case !object && r.Method == http.MethodPost && has("delete"):
		return "DeleteObjects"
	}
	return r.Method + " " + r.URL.Path
}

// ChecksumHeaders returns, as sorted "name: value" lines, the request's
// headers that carry an additional checksum or ask for one: any
// x-amz-checksum-* (a value; the algorithm or type of a multipart upload;
// x-amz-checksum-mode asking a GET for the stored checksums),
// x-amz-sdk-checksum-algorithm and Content-MD5. Names as in the S3 API
// reference ("Checking object integrity").
func (r Request) ChecksumHeaders() []string {
	return r.headers(func(name, _ string) bool {
		return strings.HasPrefix(name, "x-amz-checksum-") || name == "x-amz-sdk-checksum-algorithm" || name == "content-md5"
	})
}

// TrailerHeaders returns, as sorted "name: value" lines, the headers that
// announce a trailer after the body: x-amz-trailer, and an
// x-amz-content-sha256 of STREAMING-UNSIGNED-PAYLOAD-TRAILER or
// STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER (S3's "Signature Version 4
// streaming with trailers").
func (r Request) TrailerHeaders() []string {
	return r.headers(func(name, value string) bool {
		return name == "x-amz-trailer" || (name == "x-amz-content-sha256" && strings.HasSuffix(value, "-TRAILER"))
	})
}

// ChunkedHeaders returns, as sorted "name: value" lines, the headers of an
// aws-chunked body: Content-Encoding aws-chunked, x-amz-decoded-content-length
// and an x-amz-content-sha256 of STREAMING-*. Such a body is framed in
// chunks, with a trailer or with per-chunk signatures
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, no trailer).
func (r Request) ChunkedHeaders() []string {
	return r.headers(func(name, value string) bool {
		return (name == "content-encoding" && strings.Contains(value, "aws-chunked")) ||
			name == "x-amz-decoded-content-length" ||
			(name == "x-amz-content-sha256" && strings.HasPrefix(value, "STREAMING-"))
	})
}

func (r Request) headers(match func(name, value string) bool) []string {
	var out []string
	for k, vs := range r.Header {
		name := strings.ToLower(k)
		for _, v := range vs {
			if match(name, v) {
				out = append(out, name+": "+v)
			}
		}
	}
	sort.Strings(out)
	return out
}
