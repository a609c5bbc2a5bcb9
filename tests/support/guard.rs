//! A guard-page allocator: a byte buffer whose last byte is the last byte before a
//! `PROT_NONE` page (or whose first byte is the first after one), so any access
//! outside it kills the process with SIGSEGV.

use std::ptr::NonNull;

/// Where the inaccessible page sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Right after the last byte.
    After,
    /// Right before the first byte.
    Before,
}

/// A buffer fenced by a guard page.
pub struct GuardBuf {
    map: NonNull<u8>,
    map_len: usize,
    data: NonNull<u8>,
    len: usize,
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

impl GuardBuf {
    /// A buffer holding `bytes`, fenced as `guard` says.
    pub fn new(bytes: &[u8], guard: Guard) -> GuardBuf {
        let ps = page();
        let body = bytes.len().div_ceil(ps).max(1) * ps;
        let map_len = body + ps;
        // SAFETY: an anonymous private mapping with no address hint; checked below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED, "mmap of {map_len} bytes failed");
        let map = map.cast::<u8>();
        let (guard_page, data) = match guard {
            // SAFETY: both offsets are inside the mapping of `map_len` bytes.
            Guard::After => unsafe { (map.add(body), map.add(body - bytes.len())) },
            // SAFETY: as above.
            Guard::Before => unsafe { (map, map.add(ps)) },
        };
        // SAFETY: `guard_page` is page-aligned and one page lies inside the mapping.
        let rc = unsafe { libc::mprotect(guard_page.cast(), ps, libc::PROT_NONE) };
        assert_eq!(rc, 0, "mprotect failed");
        // SAFETY: `data..data + len` is inside the readable, writable part of the map.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len()) };
        GuardBuf {
            map: NonNull::new(map).expect("mmap result is not null"),
            map_len,
            data: NonNull::new(data).expect("inside a mapping"),
            len: bytes.len(),
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `data` points at `len` initialised, readable bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }
}

impl Drop for GuardBuf {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice outlives self.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}
