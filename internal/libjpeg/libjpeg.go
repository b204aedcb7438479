package libjpeg

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/conveyor-ml/conveyor/internal/dl"
)

// Offsets in libjpeg's structures (x86-64), the same in libjpeg-turbo's ABIs 6.2, 7 and 8
// except where abi says; TestLayout checks them against jpeglib.h with a C compiler.
const (
	offClientData     = 24  // jpeg_decompress_struct.client_data (void *)
	offImageWidth     = 48  // .image_width (JDIMENSION)
	offImageHeight    = 52  // .image_height
	offNumComponents  = 56  // .num_components (int)
	offJPEGColorSpace = 60  // .jpeg_color_space (J_COLOR_SPACE)
	offRawDataOut     = 92  // .raw_data_out (boolean, an int)
	offDCTMethod      = 96  // .dct_method (J_DCT_METHOD)
	offOutputWidth    = 136 // .output_width
	offOutputHeight   = 140 // .output_height
	offOutputScanline = 168 // .output_scanline
	offDataPrecision  = 296 // .data_precision (int)
	offCompInfo       = 304 // .comp_info (jpeg_component_info *)
	offMaxHSamp       = 408 // .max_h_samp_factor (int)
	offMaxVSamp       = 412 // .max_v_samp_factor (int)

	compInfoSize    = 96 // sizeof(jpeg_component_info)
	offCompH        = 8  // .h_samp_factor (int)
	offCompV        = 12 // .v_samp_factor (int)
	offCompWidthBlk = 28 // .width_in_blocks (JDIMENSION)

	offErrorExit     = 0  // jpeg_error_mgr.error_exit
	offEmitMessage   = 8  // .emit_message
	offFormatMessage = 24 // .format_message

	csGrayscale = 1 // JCS_GRAYSCALE
	csYCbCr     = 3 // JCS_YCbCr

	headerOK = 1 // JPEG_HEADER_OK from jpeg_read_header
)

// abi is what differs between the library's ABI versions: the version and struct size
// jpeg_CreateDecompress checks, and where the fields added by version 8 moved the rest.
type abi struct {
	version, structSize int
	offProgressive      int // .progressive_mode (boolean)
}

// libraries are the libjpeg-turbo builds tried, in order.
var libraries = []struct {
	name string
	abi  abi
}{
	{dl.Name("libjpeg.so.62", "libjpeg.62.dylib"), abi{62, 632, 312}},
	{dl.Name("libjpeg.so.8", "libjpeg.8.dylib"), abi{80, 656, 316}},
}

// ErrUnsupported is returned by DecodeRaw for files it leaves to other decoders:
// progressive or 12-bit files, colour spaces other than YCbCr and greyscale, and chroma
// sampled otherwise than once per luma MCU.
var ErrUnsupported = errors.New("libjpeg: unsupported JPEG")

// Error is a failure libjpeg reported: corrupt or truncated data, or a warning, which
// stops the decode as TurboJPEG's TJFLAG_STOPONWARNING does.
type Error struct {
	Op      string // the libjpeg function
	Msg     string // libjpeg's message
	Warning bool
}

func (e *Error) Error() string {
	kind := "error"
	if e.Warning {
		kind = "warning"
	}
	return "libjpeg: " + e.Op + ": " + kind + ": " + e.Msg
}

// Lib is the loaded library. It is safe for concurrent use.
type Lib struct {
	name string
	abi  abi

	stdError, createDecompress, destroyDecompress, memSrc, readHeader uintptr
	startDecompress, readRawData                                      uintptr
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Load opens libjpeg-turbo's libjpeg library (the first of libjpeg.so.62 and libjpeg.so.8
// that opens and is libjpeg-turbo) once per process. The error says why none could be used.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*Lib, error) {
	if !haveTrampoline || !dl.Supported {
		return nil, errors.New("libjpeg: not supported on " + runtime.GOOS + "/" + runtime.GOARCH)
	}
	var errs []error
	for _, c := range libraries {
		l := &Lib{name: c.name, abi: c.abi}
		var skip uintptr // jpeg_skip_scanlines: only libjpeg-turbo has it, not IJG's libjpeg 8
		err := dl.Bind("libjpeg", c.name, map[string]*uintptr{
			"jpeg_std_error":          &l.stdError,
			"jpeg_CreateDecompress":   &l.createDecompress,
			"jpeg_destroy_decompress": &l.destroyDecompress,
			"jpeg_mem_src":            &l.memSrc,
			"jpeg_read_header":        &l.readHeader,
			"jpeg_start_decompress":   &l.startDecompress,
			"jpeg_read_raw_data":      &l.readRawData,
			"jpeg_skip_scanlines":     &skip,
		})
		if err == nil {
			err = l.check()
		}
		if err == nil {
			return l, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// check creates and destroys one decompressor: jpeg_CreateDecompress refuses a version or
// struct size that is not the library's.
func (l *Lib) check() error {
	d := l.NewDecoder()
	defer d.Close()
	if _, err := d.call("jpeg_CreateDecompress", l.createDecompress, d.cinfo(), uintptr(l.abi.version), uintptr(l.abi.structSize)); err != nil {
		return fmt.Errorf("libjpeg: %s is not the ABI %d it is named for: %w", l.name, l.abi.version, err)
	}
	d.live = true
	return nil
}

// block is the memory libjpeg keeps pointers into from one call to the next: the
// decompressor, its error manager and the jump buffer, and the row pointers of
// jpeg_read_raw_data. It holds no Go pointers and stays pinned while its Decoder lives.
type block struct {
	cinfo [704]byte // jpeg_decompress_struct (656 bytes in ABI 8)
	err   [176]byte // jpeg_error_mgr (168 bytes)
	jb    [2]uintptr
	msg   [208]byte // format_message's buffer (JMSG_LENGTH_MAX, 200)
	image [maxComps]uintptr
	rows  [maxComps][maxRows]uintptr
}

const (
	maxComps = 3
	maxRows  = 4 * 8 // rows of one component in an iMCU row: v_samp_factor (at most 4) × 8
)

// Decoder decodes one JPEG at a time. It is not safe for concurrent use; several
// Decoders may decode in parallel. Close it to release its memory at once.
type Decoder struct {
	lib  *Lib
	b    *block
	pin  *runtime.Pinner
	live bool // b.cinfo holds a created decompressor
}

// NewDecoder returns a Decoder of l.
func (l *Lib) NewDecoder() *Decoder {
	d := &Decoder{lib: l, b: new(block), pin: new(runtime.Pinner)}
	b := d.b
	d.pin.Pin(b)
	runtime.AddCleanup(d, func(p *runtime.Pinner) { p.Unpin() }, d.pin)
	// The error manager: libjpeg's, with error_exit and emit_message replaced by the
	// trampoline's (call_amd64.s), which find the jump buffer in client_data.
	e := uintptr(unsafe.Pointer(&b.err[0]))
	dl.Call(l.stdError, e)
	*(*uintptr)(unsafe.Pointer(&b.err[offErrorExit])) = jpegErrorExitPC
	*(*uintptr)(unsafe.Pointer(&b.err[offEmitMessage])) = jpegEmitMessagePC
	*(*uintptr)(unsafe.Pointer(&b.cinfo[0])) = e // .err, kept by jpeg_CreateDecompress
	*(*uintptr)(unsafe.Pointer(&b.cinfo[offClientData])) = uintptr(unsafe.Pointer(&b.jb[0]))
	return d
}

// Close releases the Decoder. It is idempotent.
func (d *Decoder) Close() {
	if d.b == nil {
		return
	}
	d.destroy()
	d.pin.Unpin()
	d.b = nil
}

func (d *Decoder) cinfo() uintptr { return uintptr(unsafe.Pointer(&d.b.cinfo[0])) }

// call calls fn(a1, a2, a3) through the trampoline, which comes back here if libjpeg
// raises an error or a warning on the way; op names fn in the error.
func (d *Decoder) call(op string, fn, a1, a2, a3 uintptr) (uintptr, error) {
	b := d.b
	r := dl.Call(jpegCallPC, uintptr(unsafe.Pointer(&b.jb[0])), fn, a1, a2, a3)
	if b.jb[1] == 0 {
		return r, nil
	}
	msg := "(no message)"
	if f := *(*uintptr)(unsafe.Pointer(&b.err[offFormatMessage])); f != 0 {
		b.msg = [len(b.msg)]byte{}
		dl.Call(f, d.cinfo(), uintptr(unsafe.Pointer(&b.msg[0])))
		n := 0
		for n < len(b.msg) && b.msg[n] != 0 {
			n++
		}
		msg = string(b.msg[:n])
	}
	return 0, &Error{Op: op, Msg: msg, Warning: b.jb[1] == 2}
}

// destroy frees what libjpeg allocated for the last decode, after an error too.
func (d *Decoder) destroy() {
	if d.live {
		dl.Call(d.lib.destroyDecompress, d.cinfo())
		d.live = false
	}
}

func (d *Decoder) i32(off int) int { return int(*(*int32)(unsafe.Pointer(&d.b.cinfo[off]))) }

func (d *Decoder) u32(off int) int { return int(*(*uint32)(unsafe.Pointer(&d.b.cinfo[off]))) }

// Planes are the component planes of a decode: luma (or grey), then Cb and Cr.
type Planes struct {
	Width, Height int // the image's size
	Comps         int // 1 (greyscale) or 3 (YCbCr)
	// H and V are each component's sampling factors; chroma's are always 1.
	H, V [maxComps]int
	// Pix[i] holds plane i's rows Stride[i] bytes apart, from the top of the image.
	Pix    [maxComps][]byte
	Stride [maxComps]int
	// Rows is how many luma rows were decoded, from the top; chroma plane i holds
	// ceil(Rows × V[i] / V[0]) of its rows.
	Rows int
}

// DecodeRaw decodes data, a sequential 8-bit greyscale or YCbCr JPEG, into its planes at
// their own resolutions (raw data: no upsampling, no colour conversion), from the top of
// the image down to at least luma row rows-1 (all rows if rows <= 0), and no further: the
// entropy-coded data below is not read. Plane i's memory comes from grow(i, n), which
// must return at least n bytes; the result shares it. A file DecodeRaw does not take
// gives ErrUnsupported; corrupt data an *Error.
func (d *Decoder) DecodeRaw(data []byte, rows int, grow func(plane, n int) []byte) (Planes, error) {
	var p Planes
	if d.b == nil {
		return p, errors.New("libjpeg: decoder is closed")
	}
	if len(data) == 0 {
		return p, &Error{Op: "jpeg_mem_src", Msg: "empty input"}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&data[0])
	// A fresh decompressor per file: libjpeg keeps the tables of the last file in it, and
	// a file that lacks one would be decoded with another file's.
	d.destroy()
	defer d.destroy()
	l, c := d.lib, d.cinfo()
	if _, err := d.call("jpeg_CreateDecompress", l.createDecompress, c, uintptr(l.abi.version), uintptr(l.abi.structSize)); err != nil {
		return p, err
	}
	d.live = true
	if _, err := d.call("jpeg_mem_src", l.memSrc, c, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data))); err != nil {
		return p, err
	}
	if r, err := d.call("jpeg_read_header", l.readHeader, c, 1, 0); err != nil {
		return p, err
	} else if int32(r) != headerOK {
		return p, &Error{Op: "jpeg_read_header", Msg: "no image in the data"}
	}
	if err := d.header(&p); err != nil {
		return p, err
	}
	*(*int32)(unsafe.Pointer(&d.b.cinfo[offRawDataOut])) = 1
	*(*int32)(unsafe.Pointer(&d.b.cinfo[offDCTMethod])) = 0 // JDCT_ISLOW, TurboJPEG's default
	if _, err := d.call("jpeg_start_decompress", l.startDecompress, c, 0, 0); err != nil {
		return p, err
	}
	if d.u32(offOutputWidth) != p.Width || d.u32(offOutputHeight) != p.Height {
		return p, fmt.Errorf("libjpeg: output %dx%d for a %dx%d image", d.u32(offOutputWidth), d.u32(offOutputHeight), p.Width, p.Height)
	}
	if rows <= 0 || rows > p.Height {
		rows = p.Height
	}
	mcuRows := 8 * p.V[0] // luma rows of one iMCU row
	n := (rows + mcuRows - 1) / mcuRows
	for i := range p.Comps {
		ph := n * 8 * p.V[i]
		buf := grow(i, p.Stride[i]*ph)
		if len(buf) < p.Stride[i]*ph {
			return p, fmt.Errorf("libjpeg: plane %d holds %d bytes, needs %d", i, len(buf), p.Stride[i]*ph)
		}
		p.Pix[i] = buf[:p.Stride[i]*ph]
		pin.Pin(&p.Pix[i][0])
		d.b.image[i] = uintptr(unsafe.Pointer(&d.b.rows[i][0]))
	}
	for k := range n {
		for i := range p.Comps {
			vr := 8 * p.V[i]
			for r := range vr {
				d.b.rows[i][r] = uintptr(unsafe.Pointer(&p.Pix[i][(k*vr+r)*p.Stride[i]]))
			}
		}
		got, err := d.call("jpeg_read_raw_data", l.readRawData, c, uintptr(unsafe.Pointer(&d.b.image[0])), uintptr(mcuRows))
		if err != nil {
			return p, err
		}
		if int(uint32(got)) != mcuRows {
			return p, &Error{Op: "jpeg_read_raw_data", Msg: fmt.Sprintf("read %d rows of an iMCU row of %d", uint32(got), mcuRows)}
		}
	}
	p.Rows = min(n*mcuRows, p.Height)
	runtime.KeepAlive(data)
	return p, nil
}

// header reads the image's size and components after jpeg_read_header and refuses what
// DecodeRaw does not take.
func (d *Decoder) header(p *Planes) error {
	p.Width, p.Height = d.u32(offImageWidth), d.u32(offImageHeight)
	p.Comps = d.i32(offNumComponents)
	cs := d.i32(offJPEGColorSpace)
	switch {
	case d.i32(d.lib.abi.offProgressive) != 0:
		return fmt.Errorf("%w: progressive", ErrUnsupported)
	case d.i32(offDataPrecision) != 8:
		return fmt.Errorf("%w: %d-bit samples", ErrUnsupported, d.i32(offDataPrecision))
	case !(p.Comps == 1 && cs == csGrayscale) && !(p.Comps == 3 && cs == csYCbCr):
		return fmt.Errorf("%w: %d components in colour space %d", ErrUnsupported, p.Comps, cs)
	}
	hmax, vmax := d.i32(offMaxHSamp), d.i32(offMaxVSamp)
	info := *(*uintptr)(unsafe.Pointer(&d.b.cinfo[offCompInfo]))
	for i := range p.Comps {
		ci := unsafe.Add(cptr(info), i*compInfoSize)
		p.H[i] = int(*(*int32)(unsafe.Add(ci, offCompH)))
		p.V[i] = int(*(*int32)(unsafe.Add(ci, offCompV)))
		p.Stride[i] = 8 * int(*(*uint32)(unsafe.Add(ci, offCompWidthBlk)))
		want := [2]int{1, 1}
		if i == 0 {
			want = [2]int{hmax, vmax}
		}
		if [2]int{p.H[i], p.V[i]} != want || p.V[i] > 4 {
			return fmt.Errorf("%w: component %d sampled %dx%d (maximum %dx%d)", ErrUnsupported, i, p.H[i], p.V[i], hmax, vmax)
		}
	}
	return nil
}

// cptr turns an address of C memory into an unsafe.Pointer (the double indirection keeps
// vet's unsafeptr check quiet; the memory is not Go's).
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
