package manifest

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// countingReader counts the bytes read into an Progress.
type countingReader struct {
	r io.Reader
	p *Progress
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.Read.Add(int64(n))
	return n, err
}

func readSource(ctx context.Context, path string, opts Options, send func(Document) error) error {
	var r io.Reader
	source := path
	switch {
	case path == "-":
		if opts.Stdin == nil {
			return inputError(ErrNoStdin)
		}
		r, source = opts.Stdin, "stdin"
	case IsURL(path):
		body, err := openURL(ctx, path, opts)
		if err != nil {
			return err
		}
		defer body.Close()
		r = body
	default:
		f, err := os.Open(path)
		if err != nil {
			return inputErrorf("%s: %v", path, unwrapPathError(err))
		}
		defer f.Close()
		r = f
	}
	if opts.Progress != nil {
		r = countingReader{r, opts.Progress}
	}
	s := &docScanner{r: bufio.NewReaderSize(r, 64*1024), source: source, max: opts.maxDoc(), send: send, prefilter: opts.Prefilter}
	return s.run()
}

// openURL starts the download of an http(s) URL, bounded in time and size.
func openURL(ctx context.Context, u string, opts Options) (io.ReadCloser, error) {
	if _, err := url.Parse(u); err != nil {
		return nil, inputErrorf("%s: %v", u, err)
	}
	timeout := opts.URLTimeout
	if timeout <= 0 {
		timeout = DefaultURLTimeout
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: timeout}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, inputErrorf("%s: %v", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, unavailable(fmt.Errorf("%s: no answer within %v", u, timeout))
		}
		if hint := tlsHint(err); hint != "" {
			return nil, unavailable(fmt.Errorf("%s: %w; %s", u, unwrapURLError(err), hint))
		}
		return nil, unavailable(fmt.Errorf("%s: %w", u, unwrapURLError(err)))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		err := fmt.Errorf("%s: the server answered %s", u, resp.Status)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return nil, inputError(err)
		}
		return nil, unavailable(err)
	}
	limit := opts.MaxURLBytes
	if limit <= 0 {
		limit = DefaultMaxURLBytes
	}
	if opts.Progress != nil && resp.ContentLength > 0 {
		opts.Progress.Total.Add(resp.ContentLength)
	}
	return &urlBody{body: resp.Body, cancel: cancel, left: limit, limit: limit, url: u, timeout: timeout, ctx: ctx}, nil
}

// tlsHint says how to trust a URL's server whose certificate this machine does not accept: Go
// reads the authorities from the system's store, or from the files SSL_CERT_FILE and
// SSL_CERT_DIR name (on Linux and the BSDs), as curl and kubectl's own downloads do.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return "to trust a private certificate authority, run again with SSL_CERT_FILE=FILE, FILE holding its certificate (PEM), or download the file and pass its path"
	case errors.As(err, &host):
		return "use the host name the server's certificate names, or download the file and pass its path"
	case errors.As(err, &invalid):
		return "the server's certificate is not valid: download the file another way and pass its path"
	}
	return ""
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

type urlBody struct {
	body    io.ReadCloser
	cancel  context.CancelFunc
	left    int64
	limit   int64
	url     string
	timeout time.Duration
	ctx     context.Context
}

func (b *urlBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, inputErrorf("%s: larger than %s, the limit for one URL: download it and pass the file", b.url, byteSize(b.limit))
	}
	if int64(len(p)) > b.left {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if err != nil && err != io.EOF && b.ctx.Err() != nil && errors.Is(b.ctx.Err(), context.DeadlineExceeded) {
		return n, unavailable(fmt.Errorf("%s: not downloaded within %v", b.url, b.timeout))
	}
	return n, err
}

func (b *urlBody) Close() error {
	b.cancel()
	return b.body.Close()
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
