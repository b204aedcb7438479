package pinned

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/conveyor-ml/conveyor/internal/units"
)

// pageSize is the unit of every mapping and of every buffer's start address.
var pageSize = os.Getpagesize()

// defaultBuffers is how many buffers an unset Budget buys: enough to double-buffer
// both the batcher and the transfer stage.
const defaultBuffers = 4

// Options configures a Pool. A nil *Options passed to New means all defaults, which fails
// validation because BufferSize has none.
type Options struct {
	// BufferSize is the number of bytes Buffer.Bytes returns. Each buffer occupies
	// BufferSize rounded up to the page size, and that rounded size is the unit of Budget.
	// Required; no default.
	BufferSize int

	// Budget is the most bytes the pool maps. The pool holds
	// floor(Budget / page-rounded BufferSize) buffers, all mapped by New, and it is an
	// error if that is fewer than one. Default: 4 buffers' worth.
	Budget int64

	// Initial is how many buffers New maps; Grow maps the rest of Budget's when wanted.
	// Default 0: every buffer Budget holds.
	Initial int

	// Lock asks for the slabs to be page-locked with mlock, so that a DMA engine can read
	// them without the kernel paging them out. When the kernel refuses (RLIMIT_MEMLOCK,
	// EPERM, ENOMEM) or the OS has no mlock, the pool uses unlocked memory and says so in
	// Stats.Locked and Stats.LockError rather than failing. Default: true.
	Lock *bool

	// Register, when set, is called once per slab after it is mapped (and locked), with
	// the whole slab; the GPU backend uses it for cuMemHostRegister. An error fails New,
	// unless RegisterOptional. It must not call methods of the Pool. Default: nil.
	Register func(slab []byte) error

	// RegisterOptional makes a Register failure at New not an error: the pool goes on
	// with memory that is not registered (and registers none it maps later), and says so
	// in Stats.Registered and Stats.RegisterError, as Lock does for mlock. For a driver
	// that refuses registration (some virtual machines), where unregistered memory still
	// works, only more slowly. Default: false.
	RegisterOptional bool

	// Unregister, when set, is called once per slab just before it is unmapped: at
	// Close, or for a slab with leaked buffers, at the Release of its last one (where
	// an error has no one to go to and is dropped). It must not call methods of the
	// Pool. Default: nil.
	Unregister func(slab []byte) error
}

// EnsureDefaults fills unset fields of o with their defaults and returns o; a nil o is
// replaced by a new Options. New calls it on its copy of the options, then Validate.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.Budget == 0 && o.BufferSize > 0 && o.BufferSize <= maxBufferSize() {
		o.Budget = defaultBuffers * int64(roundToPage(o.BufferSize))
	}
	if o.Lock == nil {
		lock := true
		o.Lock = &lock
	}
	return o
}

// Validate reports every reason o, as given, does not describe a usable pool, joined
// (errors.Join), each naming its field; nil means it does. Call EnsureDefaults first so
// that unset fields take their defaults.
func (o *Options) Validate() error {
	if o == nil {
		return fmt.Errorf("pinned: nil Options")
	}
	var errs []error
	switch {
	case o.BufferSize <= 0:
		errs = append(errs, fmt.Errorf("pinned: Options.BufferSize is %d; it must be > 0", o.BufferSize))
	case o.BufferSize > maxBufferSize():
		errs = append(errs, fmt.Errorf("pinned: Options.BufferSize %d is too large", o.BufferSize))
	default: // Budget is measured in page-rounded buffers
		stride := int64(roundToPage(o.BufferSize))
		if o.Budget < stride {
			errs = append(errs, fmt.Errorf("pinned: Options.Budget %d is less than one buffer (%d bytes: BufferSize %d rounded up to the %d-byte page)",
				o.Budget, stride, o.BufferSize, pageSize))
		} else if n := o.Budget / stride; n > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("pinned: Options.Budget %d holds %d buffers; at most %d are allowed", o.Budget, n, math.MaxInt32))
		}
	}
	if o.Initial < 0 {
		errs = append(errs, fmt.Errorf("pinned: Options.Initial %d is negative", o.Initial))
	}
	return errors.Join(errs...)
}

// String prints the effective configuration (defaults applied) for a training log.
func (o *Options) String() string {
	var c Options
	if o != nil {
		c = *o
	}
	c.EnsureDefaults()
	var sb strings.Builder
	sb.WriteString("pinned.Options{BufferSize: ")
	sb.WriteString(strconv.Itoa(c.BufferSize))
	if c.BufferSize > 0 && c.BufferSize <= maxBufferSize() {
		stride := roundToPage(c.BufferSize)
		fmt.Fprintf(&sb, " (%s, %d page-rounded), Budget: %d (%s, %d buffers)",
			units.Bytes(int64(c.BufferSize)), stride, c.Budget, units.Bytes(c.Budget), c.Budget/int64(stride))
	} else {
		fmt.Fprintf(&sb, ", Budget: %d", c.Budget)
	}
	if c.Initial > 0 {
		fmt.Fprintf(&sb, ", Initial: %d", c.Initial)
	}
	fmt.Fprintf(&sb, ", Lock: %t, Register: %s, Unregister: %s", *c.Lock, setOrNil(c.Register != nil), setOrNil(c.Unregister != nil))
	if c.RegisterOptional {
		sb.WriteString(", RegisterOptional: true")
	}
	sb.WriteString("}")
	return sb.String()
}

func setOrNil(set bool) string {
	if set {
		return "set"
	}
	return "nil"
}

// maxBufferSize keeps roundToPage from overflowing.
func maxBufferSize() int { return math.MaxInt - pageSize + 1 }

func roundToPage(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }
