//! Owned wrappers over Tesseract's C API (`leptess::capi`): an engine (`TessBaseAPI`) and the
//! recognition monitor (`ETEXT_DESC`) that carries the page deadline and the cancel flag, each
//! freed on drop; and the OpenMP limit that keeps every engine on one thread.

use std::cell::Cell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::time::Duration;

use leptess::capi as tess;

use crate::image::Pix;
use crate::{Control, OcrError};

/// What an engine is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Recognition with the settings' languages, automatic page segmentation (as the CLI).
    Recognize,
    /// Orientation and script detection only (`osd` data, PSM 0).
    Orientation,
}

/// One Tesseract instance. Not shared: the pool hands it to one page at a time.
pub(crate) struct Engine {
    api: NonNull<tess::TessBaseAPI>,
}

// SAFETY: a TessBaseAPI has no thread affinity; it is only unsafe to use from two threads at
// once, which the pool prevents (an engine is owned by exactly one page at a time).
unsafe impl Send for Engine {}

/// One recognized line (`Engine::lines`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextLine {
    /// The line's text, ending with a newline as Tesseract gives it.
    pub text: String,
    pub top: c_int,
    pub bottom: c_int,
    pub starts_paragraph: bool,
}

/// Why recognition stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    Canceled,
    Deadline,
    Failed,
}

/// The Debian packages that hold the data of `languages` (`eng+deu` →
/// `tesseract-ocr-eng tesseract-ocr-deu`).
pub(crate) fn packages_for(languages: &str) -> String {
    languages
        .split('+')
        .filter(|l| !l.is_empty())
        .map(|l| format!("tesseract-ocr-{}", l.to_lowercase().replace('_', "-")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Language names are passed to C: letters, digits, `_`, `-` and `+` only.
pub(crate) fn valid_languages(languages: &str) -> bool {
    !languages.is_empty()
        && languages
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'+')
        && languages.split('+').all(|l| !l.is_empty())
}

impl Engine {
    /// Loads an engine from the system's tessdata (`TESSDATA_PREFIX` or the compiled-in
    /// default). Fails `ocr_unavailable` naming the packages when the data is missing.
    pub(crate) fn new(languages: &str, role: Role) -> Result<Engine, OcrError> {
        let lang = match role {
            Role::Recognize => languages,
            Role::Orientation => "osd",
        };
        if !valid_languages(lang) {
            return Err(OcrError::new(
                "ocr_unavailable",
                format!("`{lang}` is not a Tesseract language list (e.g. `eng` or `eng+deu`)"),
                false,
            ));
        }
        let c_lang = CString::new(lang).map_err(|_| OcrError::failed("bad language name"))?;
        limit_openmp_on_this_thread();
        // SAFETY: TessBaseAPICreate has no preconditions; null means out of memory.
        let raw = unsafe { tess::TessBaseAPICreate() };
        let api = NonNull::new(raw)
            .ok_or_else(|| OcrError::new("ocr_unavailable", "Tesseract could not start", true))?;
        let engine = Engine { api };
        // SAFETY: a live handle; a null data path means the default tessdata directory; the
        // language string outlives the call.
        let rc = unsafe {
            tess::TessBaseAPIInit2(
                engine.api.as_ptr(),
                std::ptr::null(),
                c_lang.as_ptr(),
                tess::TessOcrEngineMode_OEM_DEFAULT,
            )
        };
        if rc != 0 {
            return Err(OcrError::new(
                "ocr_unavailable",
                format!(
                    "Tesseract cannot load the language data `{lang}`; install {} (or set \
                     TESSDATA_PREFIX)",
                    packages_for(lang)
                ),
                false,
            ));
        }
        // Tesseract writes its diagnostics to stderr unless told otherwise; our errors and
        // warnings say what matters.
        engine.set_variable(c"debug_file", c"/dev/null");
        let psm = match role {
            Role::Recognize => tess::TessPageSegMode_PSM_AUTO,
            Role::Orientation => tess::TessPageSegMode_PSM_OSD_ONLY,
        };
        // SAFETY: a live, initialised handle.
        unsafe { tess::TessBaseAPISetPageSegMode(engine.api.as_ptr(), psm) };
        Ok(engine)
    }

    fn set_variable(&self, name: &CStr, value: &CStr) {
        // SAFETY: a live handle and two NUL-terminated strings that outlive the call.
        unsafe {
            tess::TessBaseAPISetVariable(self.api.as_ptr(), name.as_ptr(), value.as_ptr());
        }
    }

    /// Gives the engine a page and its real resolution. The engine takes its own reference
    /// to the image, so `pix` may be dropped afterwards.
    pub(crate) fn set_image(&mut self, pix: &Pix, dpi: u32) {
        let dpi = c_int::try_from(dpi).unwrap_or(300);
        // SAFETY: a live handle and a live Pix; Tesseract clones the Pix.
        unsafe {
            tess::TessBaseAPISetImage2(self.api.as_ptr(), pix.as_ptr());
            tess::TessBaseAPISetSourceResolution(self.api.as_ptr(), dpi);
        }
    }

    /// Orientation detection on the current image: the page's counter-clockwise orientation in
    /// degrees (0, 90, 180, 270) and its confidence; `None` when OSD found too little text.
    pub(crate) fn detect_orientation(&mut self) -> Option<(u32, f32)> {
        limit_openmp_on_this_thread();
        let mut degrees: c_int = 0;
        let mut confidence: f32 = 0.0;
        let mut script: *const c_char = std::ptr::null();
        let mut script_confidence: f32 = 0.0;
        // SAFETY: a live handle with an image set; the out-pointers are valid for the call;
        // the script name points into Tesseract's own tables and is not freed by us.
        let ok = unsafe {
            tess::TessBaseAPIDetectOrientationScript(
                self.api.as_ptr(),
                &mut degrees,
                &mut confidence,
                &mut script,
                &mut script_confidence,
            )
        };
        if ok == 0 {
            return None;
        }
        let degrees = u32::try_from(degrees.rem_euclid(360)).unwrap_or(0);
        Some((degrees, confidence))
    }

    /// Recognizes the current image under `monitor`'s deadline and cancel flag.
    pub(crate) fn recognize(
        &mut self,
        control: &Control,
        time_left: Duration,
    ) -> Result<(), Stopped> {
        limit_openmp_on_this_thread();
        let started = std::time::Instant::now();
        let monitor = Monitor::new(control, time_left).ok_or(Stopped::Failed)?;
        // SAFETY: a live handle with an image set, and a live monitor whose cancel_this
        // points to `control`, which outlives this call.
        let rc = unsafe { tess::TessBaseAPIRecognize(self.api.as_ptr(), monitor.as_ptr()) };
        drop(monitor);
        if rc == 0 {
            return Ok(());
        }
        if control.is_canceled() {
            Err(Stopped::Canceled)
        } else if started.elapsed() >= time_left || control.remaining().is_some_and(|r| r.is_zero())
        {
            Err(Stopped::Deadline)
        } else {
            Err(Stopped::Failed)
        }
    }

    /// The text of the last recognition.
    pub(crate) fn text(&mut self) -> String {
        // SAFETY: a live handle after a finished Recognize (so this does not recognize again);
        // the returned string is ours to free with TessDeleteText.
        unsafe {
            let raw = tess::TessBaseAPIGetUTF8Text(self.api.as_ptr());
            if raw.is_null() {
                return String::new();
            }
            let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
            tess::TessDeleteText(raw);
            text
        }
    }

    /// The lines of the last recognition, in reading order, each with its vertical extent
    /// (pixel rows of the image) and whether it starts a paragraph.
    pub(crate) fn lines(&mut self) -> Vec<TextLine> {
        let mut out = Vec::new();
        let line = tess::TessPageIteratorLevel_RIL_TEXTLINE;
        // SAFETY: a live handle after a finished Recognize; the iterator is ours to delete
        // once; the page iterator it hands out is owned by it (not freed by us); each text is
        // ours to free with TessDeleteText.
        unsafe {
            let it = tess::TessBaseAPIGetIterator(self.api.as_ptr());
            if it.is_null() {
                return out;
            }
            let page = tess::TessResultIteratorGetPageIterator(it);
            loop {
                let raw = tess::TessResultIteratorGetUTF8Text(it, line);
                if !raw.is_null() {
                    let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
                    tess::TessDeleteText(raw);
                    let (mut left, mut top, mut right, mut bottom) = (0, 0, 0, 0);
                    tess::TessPageIteratorBoundingBox(
                        page,
                        line,
                        &mut left,
                        &mut top,
                        &mut right,
                        &mut bottom,
                    );
                    let starts_paragraph = tess::TessPageIteratorIsAtBeginningOf(
                        page,
                        tess::TessPageIteratorLevel_RIL_PARA,
                    ) != 0;
                    out.push(TextLine {
                        text,
                        top,
                        bottom,
                        starts_paragraph,
                    });
                }
                if tess::TessResultIteratorNext(it, line) == 0 {
                    break;
                }
            }
            tess::TessResultIteratorDelete(it);
        }
        out
    }

    /// Each recognized word's confidence (0 to 100) from the last recognition.
    pub(crate) fn word_confidences(&mut self) -> Vec<i32> {
        let mut out = Vec::new();
        // SAFETY: a live handle after a finished Recognize; the array is terminated by -1 and
        // ours to free with TessDeleteIntArray.
        unsafe {
            let raw = tess::TessBaseAPIAllWordConfidences(self.api.as_ptr());
            if raw.is_null() {
                return out;
            }
            let mut at = raw;
            while *at >= 0 {
                out.push(*at);
                at = at.add(1);
            }
            tess::TessDeleteIntArray(raw);
        }
        out
    }

    /// Frees the page and its results; the engine keeps its models for the next page.
    pub(crate) fn clear(&mut self) {
        // SAFETY: a live handle; Clear only frees page data.
        unsafe { tess::TessBaseAPIClear(self.api.as_ptr()) };
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: we own the handle; End frees its models and Delete the handle, once.
        unsafe {
            tess::TessBaseAPIEnd(self.api.as_ptr());
            tess::TessBaseAPIDelete(self.api.as_ptr());
        }
    }
}

/// Tesseract's recognition monitor: a deadline and a cancel callback reading `Control`.
struct Monitor<'a> {
    raw: NonNull<tess::ETEXT_DESC>,
    _control: PhantomData<&'a Control>,
}

/// Tesseract calls this between words; `true` stops recognition.
unsafe extern "C" fn should_cancel(cancel_this: *mut c_void, _words: c_int) -> bool {
    if cancel_this.is_null() {
        return false;
    }
    // SAFETY: cancel_this is the `&Control` the Monitor borrowed, alive for the whole
    // Recognize call (the Monitor cannot outlive the borrow).
    let control = unsafe { &*(cancel_this as *const Control) };
    control.is_canceled() || control.remaining().is_some_and(|r| r.is_zero())
}

impl<'a> Monitor<'a> {
    fn new(control: &'a Control, time_left: Duration) -> Option<Monitor<'a>> {
        // SAFETY: TessMonitorCreate has no preconditions; null means out of memory.
        let raw = NonNull::new(unsafe { tess::TessMonitorCreate() })?;
        let ms = c_int::try_from(time_left.as_millis())
            .unwrap_or(c_int::MAX)
            .max(1);
        // SAFETY: a live monitor; the callback has the C signature Tesseract expects and
        // cancel_this is a pointer to `control`, borrowed for 'a, so it stays valid for as
        // long as the Monitor exists.
        unsafe {
            tess::TessMonitorSetDeadlineMSecs(raw.as_ptr(), ms);
            tess::TessMonitorSetCancelFunc(raw.as_ptr(), Some(should_cancel));
            tess::TessMonitorSetCancelThis(raw.as_ptr(), control as *const Control as *mut c_void);
        }
        Some(Monitor {
            raw,
            _control: PhantomData,
        })
    }

    fn as_ptr(&self) -> *mut tess::ETEXT_DESC {
        self.raw.as_ptr()
    }
}

impl Drop for Monitor<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the monitor and free it once.
        unsafe { tess::TessMonitorDelete(self.raw.as_ptr()) };
    }
}

type OmpSetInt = unsafe extern "C" fn(c_int);

/// libgomp's setters, looked up at run time: Tesseract links OpenMP, Shelf does not.
fn omp_setters() -> &'static (Option<OmpSetInt>, Option<OmpSetInt>) {
    static SETTERS: OnceLock<(Option<OmpSetInt>, Option<OmpSetInt>)> = OnceLock::new();
    SETTERS.get_or_init(|| {
        let find = |name: &CStr| -> Option<OmpSetInt> {
            // SAFETY: dlsym with RTLD_DEFAULT searches the loaded objects for a NUL-terminated
            // name; it returns null when absent.
            let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            if sym.is_null() {
                None
            } else {
                // SAFETY: both symbols are `void f(int)` in every libgomp (OpenMP API).
                Some(unsafe { std::mem::transmute::<*mut c_void, OmpSetInt>(sym) })
            }
        };
        (
            find(c"omp_set_num_threads"),
            find(c"omp_set_max_active_levels"),
        )
    })
}

/// Keeps Tesseract's OpenMP loops on the calling thread (the `OMP_THREAD_LIMIT=1` effect).
///
/// Why per thread, not once: libgomp keeps these settings in the *calling thread's* ICVs once
/// a thread writes them, and a thread that never wrote them reads the process defaults; so
/// every thread that runs Tesseract sets them for itself, once. `max_active_levels = 0`
/// is the one that matters: Tesseract asks for `num_threads(10)` explicitly in its LSTM
/// loops, which overrides `omp_set_num_threads`, but no region can be active at level 0.
/// Setting `OMP_THREAD_LIMIT` instead is too late once libgomp is loaded (and unsafe in
/// edition 2024).
pub(crate) fn limit_openmp_on_this_thread() {
    thread_local! {
        static LIMITED: Cell<bool> = const { Cell::new(false) };
    }
    if LIMITED.with(Cell::get) {
        return;
    }
    let (num_threads, max_levels) = omp_setters();
    // SAFETY: libgomp's setters only store an integer in the thread's (or global) ICVs.
    unsafe {
        if let Some(set) = num_threads {
            set(1);
        }
        if let Some(set) = max_levels {
            set(0);
        }
    }
    LIMITED.with(|l| l.set(true));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_lists_are_checked_and_named_as_packages() {
        assert!(valid_languages("eng"));
        assert!(valid_languages("eng+deu"));
        assert!(valid_languages("chi_sim"));
        assert!(!valid_languages(""));
        assert!(!valid_languages("eng+"));
        assert!(!valid_languages("eng;rm -rf"));
        assert!(!valid_languages("../eng"));
        assert_eq!(
            packages_for("eng+chi_sim"),
            "tesseract-ocr-eng tesseract-ocr-chi-sim"
        );
    }
}
