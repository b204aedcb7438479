package decode

import (
	"encoding/binary"
	"errors"
)

// The entropy-coded scans of jpegFast: Huffman decoding through a 64-bit bit buffer,
// restart intervals, and the inverse DCT of the blocks in the region.

// scan decodes one scan: its header in seg, then the entropy-coded data from d.pos.
func (d *jpegFast) scan(seg []byte) error {
	if d.ncomp == 0 {
		return errors.New("scan before frame header")
	}
	if len(seg) < 1 {
		return errors.New("short SOS segment")
	}
	ns := int(seg[0])
	if ns < 1 || ns > d.ncomp || len(seg) != 4+2*ns {
		return errors.New("bad SOS segment")
	}
	var sc [3]*jpegComp
	for i := range ns {
		id, tables := seg[1+2*i], seg[2+2*i]
		var c *jpegComp
		for j := 0; j < d.ncomp; j++ {
			if d.comp[j].id == id {
				c = &d.comp[j]
			}
		}
		if c == nil || c.scanned {
			return errors.New("scan names an unknown or repeated component")
		}
		c.scanned = true
		c.td, c.ta = int(tables>>4), int(tables&15)
		maxTable := 3
		if d.baseline {
			maxTable = 1 // as image/jpeg insists
		}
		if c.td > maxTable || c.ta > maxTable || !d.dcok[c.td] || !d.acok[c.ta] || !d.qok[c.tq] {
			return errors.New("scan uses a missing Huffman or quantisation table")
		}
		c.pred = 0
		sc[i] = c
	}
	if ss, se, a := seg[1+2*ns], seg[2+2*ns], seg[3+2*ns]; ss != 0 || se != 63 || a != 0 {
		return errors.New("bad spectral selection for a sequential scan")
	}
	d.acc, d.n, d.pad, d.rst = 0, 0, 0, 0
	var err error
	if ns == 1 {
		err = d.scanOne(sc[0])
	} else {
		err = d.scanMany(sc[:ns])
	}
	if err != nil {
		return err
	}
	// Bits left in acc are the scan's final padding: the next marker is at d.pos.
	return nil
}

// scanMany decodes an interleaved scan, MCU by MCU.
func (d *jpegFast) scanMany(sc []*jpegComp) error {
	todo := d.restart
	for my := 0; my < d.mcusY; my++ {
		for mx := 0; mx < d.mcusX; mx++ {
			if d.restart > 0 {
				if todo == 0 {
					if err := d.nextInterval(sc); err != nil {
						return err
					}
					todo = d.restart
				}
				todo--
			}
			for _, c := range sc {
				plane := d.planes[c.idx]
				for v := 0; v < c.v; v++ {
					by := my*c.v + v
					for h := 0; h < c.h; h++ {
						bx := mx*c.h + h
						if err := d.block(c, plane, bx, by); err != nil {
							return err
						}
					}
				}
			}
			if d.n < d.pad {
				return errors.New("entropy-coded data ends early: truncated")
			}
		}
	}
	return nil
}

// scanOne decodes a non-interleaved scan of one component, block by block.
func (d *jpegFast) scanOne(c *jpegComp) error {
	plane := d.planes[c.idx]
	todo := d.restart
	for by := 0; by < c.bh; by++ {
		for bx := 0; bx < c.bw; bx++ {
			if d.restart > 0 {
				if todo == 0 {
					if err := d.nextInterval([]*jpegComp{c}); err != nil {
						return err
					}
					todo = d.restart
				}
				todo--
			}
			if err := d.block(c, plane, bx, by); err != nil {
				return err
			}
			if d.n < d.pad {
				return errors.New("entropy-coded data ends early: truncated")
			}
		}
	}
	return nil
}

// nextInterval expects a restart marker at d.pos and resets the bit buffer and the DC
// predictors for the next restart interval.
func (d *jpegFast) nextInterval(sc []*jpegComp) error {
	if d.n < d.pad {
		return errors.New("entropy-coded data ends early: truncated")
	}
	data := d.data
	for d.pos+1 < len(data) && data[d.pos] == 0xff && data[d.pos+1] == 0xff {
		d.pos++
	}
	if d.pos+1 >= len(data) || data[d.pos] != 0xff || data[d.pos+1] != 0xd0+byte(d.rst&7) {
		return errors.New("missing or misnumbered restart marker")
	}
	d.rst++
	d.pos += 2
	d.acc, d.n, d.pad = 0, 0, 0
	for _, c := range sc {
		c.pred = 0
	}
	return nil
}

// fill tops acc up to at least 57 bits. At a marker or the end of data it appends zero
// bits without moving d.pos, and counts them in d.pad.
func (d *jpegFast) fill() {
	data := d.data
	if d.pos+8 <= len(data) {
		v := binary.BigEndian.Uint64(data[d.pos:])
		// No 0xff byte among the eight: take as many whole bytes as fit.
		if x := ^v; (x-0x0101010101010101)&^x&0x8080808080808080 == 0 {
			k := (64 - d.n) >> 3
			d.acc |= v >> (64 - 8*k) << (64 - d.n - 8*k)
			d.n += 8 * k
			d.pos += k
			return
		}
	}
	for d.n <= 56 {
		var b byte
		switch {
		case d.pos >= len(data):
			d.pad += 8
		case data[d.pos] != 0xff:
			b = data[d.pos]
			d.pos++
		case d.pos+1 < len(data) && data[d.pos+1] == 0:
			b = 0xff
			d.pos += 2
		default: // a marker
			d.pad += 8
		}
		d.acc |= uint64(b) << (56 - d.n)
		d.n += 8
	}
}

// slowSymbol decodes a Huffman code longer than the lookahead from the top of acc
// (holding at least 16 bits): it returns the symbol and the code's length, or length 0
// for a bad code.
func (t *huffTable) slowSymbol(acc uint64) (sym byte, l int) {
	for l := jpegLookBits + 1; l <= 16; l++ {
		if code := int32(acc >> (64 - l)); code <= t.maxcode[l] {
			return t.vals[uint8(code+t.delta[l])], l
		}
	}
	return 0, 0
}

var errBadHuffman = errors.New("bad Huffman code")

// block decodes the next block of c into block (bx, by) of plane, inverse-transforming
// it only if it lies in c's region. The bit buffer lives in locals here, the decoder's
// inner loop, and goes back to d only around a refill.
func (d *jpegFast) block(c *jpegComp, plane []byte, bx, by int) error {
	acc, n := d.acc, d.n
	if n < 32 {
		d.acc, d.n = acc, n
		d.fill()
		acc, n = d.acc, d.n
	}
	dct := &d.dc[c.td]
	var s int
	if e := dct.look[acc>>(64-jpegLookBits)]; e != 0 {
		s = int(e & 0xff)
		acc <<= e >> 8
		n -= int(e >> 8)
	} else {
		sym, l := dct.slowSymbol(acc)
		if l == 0 {
			return errBadHuffman
		}
		s = int(sym)
		acc <<= l
		n -= l
	}
	if s > 11 {
		return errors.New("bad DC coefficient size")
	}
	if s > 0 {
		c.pred += extend(int32(acc>>(64-s)), s)
		acc <<= s
		n -= s
	}
	blk := &d.blk
	q := &d.q[c.tq]
	t := &d.ac[c.ta]
	blk[0] = c.pred * q[0]
	ac := false
	for k := uint(1); k < 64; {
		if n < 32 {
			d.acc, d.n = acc, n
			d.fill()
			acc, n = d.acc, d.n
		}
		if f := t.fast[acc>>(64-jpegLookBits)]; f != 0 {
			k += uint(f>>4) & 15
			acc <<= uint(f & 15)
			n -= int(f & 15)
			if k > 63 {
				return errors.New("too many coefficients in a block")
			}
			blk[jpegZigzag[k]&63] = (f >> 8) * q[k]
			k++
			ac = true
			continue
		}
		var rs byte
		if e := t.look[acc>>(64-jpegLookBits)]; e != 0 {
			rs = byte(e)
			acc <<= e >> 8
			n -= int(e >> 8)
		} else {
			sym, l := t.slowSymbol(acc)
			if l == 0 {
				return errBadHuffman
			}
			rs = sym
			acc <<= l
			n -= l
		}
		r, s := uint(rs>>4), int(rs&15)
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		if k > 63 {
			return errors.New("too many coefficients in a block")
		}
		blk[jpegZigzag[k]&63] = extend(int32(acc>>(64-s)), s) * q[k]
		acc <<= s
		n -= s
		k++
		ac = true
	}
	d.acc, d.n = acc, n
	d.put(c, plane, bx, by, ac)
	return nil
}

// put inverse-transforms the decoded block into block (bx, by) of plane when it lies in
// c's region (a block without AC coefficients is one flat value), and clears it for the
// next; ac says whether it has AC coefficients.
func (d *jpegFast) put(c *jpegComp, plane []byte, bx, by int, ac bool) {
	blk := &d.blk
	if bx < c.x0 || bx >= c.x1 || by < c.y0 || by >= c.y1 {
		if ac {
			clear(blk[:])
		}
		return
	}
	dst := plane[by*8*c.stride+bx*8:]
	if !ac {
		v := clampSample((blk[0]+4)>>3 + 128)
		for y := range 8 {
			row := dst[y*c.stride : y*c.stride+8]
			for x := range row {
				row[x] = v
			}
		}
		return
	}
	idctIslow(blk, dst, c.stride)
	clear(blk[:])
}
