package s3

import (
	"crypto/x509"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Values of Config.Checksum.
const (
	// ChecksumWhenRequired adds a checksum only to the operations whose S3
	// API definition requires one (none of those tierd calls), and
	// validates no response against the store's checksums.
	ChecksumWhenRequired = "when_required"
	// ChecksumWhenSupported adds a CRC32 checksum to every upload request
	// (over TLS as a trailer of an aws-chunked body) and asks GETs for
	// the stored checksums to validate them, the AWS SDK's own default.
	ChecksumWhenSupported = "when_supported"
)

// checksumModes maps Config.Checksum to the SDK's request and response
// settings. Validate has checked the value.
func (c Config) checksumModes() (aws.RequestChecksumCalculation, aws.ResponseChecksumValidation) {
	if c.Checksum == ChecksumWhenSupported {
		return aws.RequestChecksumCalculationWhenSupported, aws.ResponseChecksumValidationWhenSupported
	}
	return aws.RequestChecksumCalculationWhenRequired, aws.ResponseChecksumValidationWhenRequired
}

// readCAFile returns the PEM file path, for the SDK's custom CA bundle.
// Errors: an unreadable file, or one with no PEM certificate that parses.
func readCAFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("s3: ca_file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("s3: ca_file %s holds no PEM certificate", path)
	}
	return data, nil
}
