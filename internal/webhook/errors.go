package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig wraps every problem Config.Validate finds.
	ErrInvalidConfig = errors.New("invalid webhook configuration")
	// ErrInvalidOption wraps every error from an invalid Option.
	ErrInvalidOption = errors.New("invalid webhook option")
	// ErrNoCertificate: no serving certificate is loaded yet (the
	// certificate reloader's error).
	ErrNoCertificate = certs.ErrNoCertificate
	// ErrShuttingDown: the server has begun to shut down.
	ErrShuttingDown = errors.New("server is shutting down")
	// ErrNotServing: the server is not listening yet.
	ErrNotServing = errors.New("server is not serving yet")
	// ErrWorkSinkUnavailable is what the default WorkSink answers when no
	// work queue is wired in.
	ErrWorkSinkUnavailable = errors.New("no work sink configured")
)

// Error is an error that crosses the wire: an HTTP status code and a
// message for the caller. Two Errors match with errors.Is when their codes
// are equal, so callers test against the sentinels below.
type Error struct {
	Code    int
	Message string
	Err     error
}

// HTTP errors the server answers with.
var (
	ErrBadRequest           = &Error{Code: http.StatusBadRequest, Message: "bad request"}
	ErrMethodNotAllowed     = &Error{Code: http.StatusMethodNotAllowed, Message: "method not allowed"}
	ErrRequestTooLarge      = &Error{Code: http.StatusRequestEntityTooLarge, Message: "request body too large"}
	ErrUnsupportedMediaType = &Error{Code: http.StatusUnsupportedMediaType, Message: "unsupported media type"}
	ErrInternal             = &Error{Code: http.StatusInternalServerError, Message: "internal error"}
	ErrUnavailable          = &Error{Code: http.StatusServiceUnavailable, Message: "unavailable"}
	// ErrOverloaded: every evaluation slot stayed busy for the queue
	// timeout, or the bodies being read are at their limits; the API
	// server applies the webhook's failurePolicy.
	ErrOverloaded = &Error{Code: http.StatusTooManyRequests, Message: "too many concurrent evaluations"}
	// ErrRequestTimeout: the request's body did not arrive before its
	// deadline.
	ErrRequestTimeout = &Error{Code: http.StatusRequestTimeout, Message: "request body not received in time"}
	// ErrDeadline: the evaluation did not finish before the request's
	// deadline; the request is answered without it (the API server applies
	// the webhook's failurePolicy).
	ErrDeadline = &Error{Code: http.StatusGatewayTimeout, Message: "evaluation not finished in time"}
)

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches any Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// httpError returns an Error with the code of kind and a formatted message.
func httpError(kind *Error, err error, format string, args ...any) *Error {
	return &Error{Code: kind.Code, Message: fmt.Sprintf(format, args...), Err: err}
}

// statusReasons maps codes to the reasons of a metav1.Status.
var statusReasons = map[int]metav1.StatusReason{
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusUnsupportedMediaType:  metav1.StatusReasonUnsupportedMediaType,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusTooManyRequests:       metav1.StatusReasonTooManyRequests,
	http.StatusRequestTimeout:        metav1.StatusReasonTimeout,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
}

// errorReply turns an error into a metav1.Status reply. Errors that are not
// an *Error are internal errors.
func errorReply(err error) *Reply {
	var e *Error
	if !errors.As(err, &e) {
		e = httpError(ErrInternal, err, "internal error")
	}
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure,
		Message:  e.Error(),
		Reason:   statusReasons[e.Code],
		Code:     int32(e.Code),
	}
	body, _ := json.Marshal(st)
	return &Reply{Code: e.Code, ContentType: contentTypeJSON, Body: body, Outcome: errorOutcome(e)}
}

// errorOutcome is rejected for a client error, error for anything else.
func errorOutcome(err error) Outcome {
	var e *Error
	if errors.As(err, &e) && e.Code == http.StatusTooManyRequests {
		return OutcomeOverloaded
	}
	if errors.As(err, &e) && e.Code == http.StatusGatewayTimeout {
		return OutcomeTimedOut
	}
	if errors.As(err, &e) && e.Code < 500 {
		return OutcomeRejected
	}
	return OutcomeError
}
