//! The `local` provider: real, offline work with no model at all. Cleaning is rule-based and
//! conservative (it must pass the fidelity check): whitespace normalization, ligatures spelled
//! out, words broken across line ends rejoined, hard-wrapped lines inside paragraphs rejoined.
//! OCR correction is rule-based too (`ocr_fix`): only fixes a word list can verify.
//! Classification scores a keyword table per Dewey division by term frequency. Titles,
//! summaries and tags are extractive. Everything is deterministic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use async_trait::async_trait;

use super::{
    Classification, CleanRequest, CorrectRequest, Provider, ProviderError, Synopsis, ocr_fix, slug,
};

/// The configuration name of this provider.
pub const NAME: &str = "local";

/// The longest summary, in characters.
pub const SUMMARY_CHARS: usize = 400;

#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProvider;

impl LocalProvider {
    pub fn new() -> Self {
        LocalProvider
    }
}

#[async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Rule-based and honest: only rejoined words and character confusions a word list can
    /// verify (see `ocr_fix`); a page with nothing verifiable comes back unchanged.
    async fn correct(&self, request: CorrectRequest<'_>) -> Result<String, ProviderError> {
        Ok(ocr_fix::correct_ocr(request.text))
    }

    async fn clean(&self, request: CleanRequest<'_>) -> Result<String, ProviderError> {
        Ok(clean_text(request.text))
    }

    async fn classify(
        &self,
        text: &str,
        _prompt_version: &str,
    ) -> Result<Classification, ProviderError> {
        Ok(classify_text(text))
    }

    async fn summarize(&self, text: &str) -> Result<Synopsis, ProviderError> {
        Ok(synopsis(text))
    }
}

// ---------------------------------------------------------------------------------------------
// Cleaning

/// How a line may take part in paragraph rejoining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineKind {
    /// Ordinary wrapped prose.
    Prose,
    /// Markdown structure (heading, list item, table row, quote, HTML comment): kept on its own
    /// line.
    Structure,
    /// Layout that a rejoin would scramble (columns, aligned text, indented code).
    Layout,
}

struct Line {
    /// The line with spaces collapsed and no trailing space (leading indentation dropped).
    text: String,
    indent: usize,
    kind: LineKind,
}

/// Rule-based copy-editing of one chunk. Never drops or reorders a word: it only changes
/// whitespace, spells ligatures out and removes the hyphen of a word broken at a line end.
pub fn clean_text(text: &str) -> String {
    let text = spell_out(text);
    let mut out: Vec<String> = Vec::new();
    let mut block: Vec<Line> = Vec::new();
    let mut fence: Option<&str> = None;
    let mut open_tail = false;
    for raw in text.lines() {
        let raw = raw.trim_end();
        if let Some(marker) = fence {
            out.push(raw.to_string());
            if raw.trim_start().starts_with(marker) {
                fence = None;
            }
            continue;
        }
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut block, &mut out, &mut open_tail);
            open_tail = false;
            fence = Some(&trimmed[..3]);
            out.push(raw.to_string());
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut block, &mut out, &mut open_tail);
            if out.last().is_some_and(|l| !l.is_empty()) {
                out.push(String::new());
            }
            continue;
        }
        block.push(classify_line(raw));
    }
    flush(&mut block, &mut out, &mut open_tail);
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    while out.first().is_some_and(String::is_empty) {
        out.remove(0);
    }
    out.join("\n")
}

/// Ligatures, soft hyphens and no-break spaces, which extraction leaves behind.
fn spell_out(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB06}' => out.push_str("st"),
            '\u{00AD}' => {}
            '\u{00A0}' | '\u{2007}' | '\u{202F}' => out.push(' '),
            '\r' => {}
            _ => out.push(c),
        }
    }
    out
}

fn collapse(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.chars() {
        if c == ' ' || c == '\t' {
            if !space && !out.is_empty() {
                out.push(' ');
            }
            space = true;
        } else if !c.is_control() {
            out.push(c);
            space = false;
        }
    }
    out.trim_end().to_string()
}

fn classify_line(raw: &str) -> Line {
    let indent: usize = raw
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum();
    let body = raw.trim();
    let structure = body.starts_with('#')
        || body.starts_with('|')
        || body.ends_with('|')
        || body.starts_with('>')
        || body.starts_with("<!--")
        || body.starts_with('<') && body.ends_with('>')
        || ["- ", "* ", "+ ", "• ", "– "]
            .iter()
            .any(|p| body.starts_with(p))
        || body == "-"
        || body == "*"
        || numbered_item(body)
        || body
            .chars()
            .all(|c| matches!(c, '-' | '=' | '*' | '_' | ' '));
    // Runs of three or more spaces inside a line mean columns or aligned text.
    let layout = indent >= 4 || body.contains("   ") || body.contains('\t');
    Line {
        text: collapse(body),
        indent,
        kind: if structure {
            LineKind::Structure
        } else if layout {
            LineKind::Layout
        } else {
            LineKind::Prose
        },
    }
}

/// `1. `, `12) `, `a. ` list items.
fn numbered_item(body: &str) -> bool {
    let marker: String = body.chars().take_while(char::is_ascii_digit).collect();
    let rest = &body[marker.len()..];
    (1..=3).contains(&marker.len()) && (rest.starts_with(". ") || rest.starts_with(") "))
}

/// Rejoins a block (lines between blank lines) and appends it to `out`. `open_tail` says
/// whether the last line written is prose that stops mid-sentence: a block that continues it
/// (a lowercase start) was split off by a page or column break and is joined back.
fn flush(block: &mut Vec<Line>, out: &mut Vec<String>, open_tail: &mut bool) {
    if block.is_empty() {
        return;
    }
    let width = block
        .iter()
        .filter(|l| l.kind == LineKind::Prose)
        .map(|l| l.text.chars().count())
        .max()
        .unwrap_or(0);
    let mut current: Option<String> = None;
    let first = &block[0];
    if *open_tail
        && first.kind == LineKind::Prose
        && first.text.chars().next().is_some_and(char::is_lowercase)
        && out.last().is_some_and(String::is_empty)
        && out.len() >= 2
    {
        out.pop();
        let mut acc = out.pop().unwrap_or_default();
        append(&mut acc, &first.text);
        current = Some(acc);
    }
    let skip = usize::from(current.is_some());
    let mut previous: Option<&Line> = (skip == 1).then_some(first);
    for line in block.iter().skip(skip) {
        let joined = match (current.as_mut(), previous) {
            (Some(acc), Some(prev)) => join_lines(acc, prev, line, width),
            _ => false,
        };
        if !joined {
            if let Some(done) = current.take() {
                out.push(done);
                // An indented prose line after an unindented one starts a paragraph.
                if let Some(prev) = previous
                    && line.kind == LineKind::Prose
                    && prev.kind == LineKind::Prose
                    && line.indent >= 2
                    && prev.indent < 2
                {
                    out.push(String::new());
                }
            }
            current = Some(line.text.clone());
        }
        previous = Some(line);
    }
    if let Some(done) = current {
        *open_tail = previous.is_some_and(|l| l.kind == LineKind::Prose) && open_end(&done);
        out.push(done);
    }
    block.clear();
}

/// Prose that stops mid-sentence: after a word, a comma or a broken word.
fn open_end(text: &str) -> bool {
    text.chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == ',')
        || broken_word(text).is_some()
}

/// Appends `next` to `acc` when `next` continues the paragraph `prev` is in.
fn join_lines(acc: &mut String, prev: &Line, next: &Line, width: usize) -> bool {
    if prev.kind != LineKind::Prose || next.kind != LineKind::Prose {
        return false;
    }
    if next.indent >= 2 && prev.indent < 2 {
        return false;
    }
    let long = width >= 25 && prev.text.chars().count() * 10 >= width * 6;
    if broken_word(&prev.text).is_none() && !long {
        return false;
    }
    append(acc, &next.text);
    true
}

/// Joins a continuation line: `exam-` + `ple` loses the hyphen that only broke the word,
/// `Greco-` + `Roman` and `1990-` + `1995` keep it with no space, anything else gets a space.
fn append(acc: &mut String, next: &str) {
    let first = next.chars().next().unwrap_or(' ');
    match broken_word(acc) {
        Some(true) if first.is_lowercase() => {
            acc.pop();
        }
        Some(_) if first.is_alphanumeric() => {}
        _ => acc.push(' '),
    }
    acc.push_str(next);
}

/// `Some(letters)` when the line ends in a hyphen right after a word character: `letters` is
/// true when that word is alphabetic. URLs and e-mail addresses are never split this way.
fn broken_word(line: &str) -> Option<bool> {
    let word = line.rsplit(' ').next()?;
    let stem = word.strip_suffix('-')?;
    if stem.ends_with('-') || word.contains("://") || word.contains('@') {
        return None;
    }
    let last = stem.chars().last()?;
    if !last.is_alphanumeric() {
        return None;
    }
    Some(last.is_alphabetic())
}

// ---------------------------------------------------------------------------------------------
// Words

const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "around",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "done",
    "down",
    "during",
    "each",
    "even",
    "ever",
    "every",
    "few",
    "first",
    "for",
    "from",
    "further",
    "get",
    "got",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "however",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "know",
    "last",
    "less",
    "let",
    "like",
    "made",
    "make",
    "many",
    "may",
    "me",
    "might",
    "more",
    "most",
    "much",
    "must",
    "my",
    "myself",
    "never",
    "new",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "often",
    "on",
    "once",
    "one",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "per",
    "rather",
    "really",
    "said",
    "same",
    "say",
    "says",
    "see",
    "seen",
    "shall",
    "she",
    "should",
    "since",
    "so",
    "some",
    "still",
    "such",
    "take",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "thing",
    "things",
    "this",
    "those",
    "though",
    "three",
    "through",
    "thus",
    "to",
    "too",
    "two",
    "under",
    "until",
    "up",
    "upon",
    "us",
    "use",
    "used",
    "using",
    "very",
    "via",
    "was",
    "way",
    "we",
    "well",
    "were",
    "what",
    "when",
    "where",
    "whether",
    "which",
    "while",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "within",
    "without",
    "would",
    "yet",
    "you",
    "your",
    "yours",
    "yourself",
    "don",
    "didn",
    "doesn",
    "isn",
    "wasn",
    "won",
    "ll",
    "ve",
    "re",
    "s",
    "t",
    "d",
    "m",
];

fn is_stopword(word: &str) -> bool {
    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
    SET.get_or_init(|| STOPWORDS.iter().copied().collect())
        .contains(word)
}

/// Lowercase words: runs of letters (apostrophes split words).
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A crude singular: `horses` → `horse`, `stories` → `story`, `churches` → `church`.
fn singular(word: &str) -> String {
    let n = word.chars().count();
    if n <= 3 {
        return word.to_string();
    }
    if let Some(stem) = word.strip_suffix("ies")
        && n > 4
    {
        return format!("{stem}y");
    }
    for suffix in ["sses", "ches", "shes", "xes", "zes"] {
        if word.ends_with(suffix) {
            return word[..word.len() - 2].to_string();
        }
    }
    if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
    {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// Term frequencies of the singular, non-stopword words.
fn term_frequencies(text: &str) -> HashMap<String, usize> {
    let mut tf = HashMap::new();
    for word in words(text) {
        if word.chars().count() < 2 || is_stopword(&word) {
            continue;
        }
        *tf.entry(singular(&word)).or_insert(0) += 1;
    }
    tf
}

// ---------------------------------------------------------------------------------------------
// Classification

/// Keywords per Dewey division (`x_0`) and for a few common sections (`636`, `641`, ...).
/// Written as plain words; they are put in singular form when the table is built.
const KEYWORDS: &[(&str, &str)] = &[
    (
        "000",
        "computer computers computing software hardware internet algorithm algorithms programming programmer database databases server servers network networks digital website web email online cybersecurity compiler processor cpu byte bytes linux unix ocr dataset artificial intelligence",
    ),
    (
        "004",
        "computer computers hardware processor cpu network networks internet",
    ),
    (
        "005",
        "software programming programmer compiler algorithm algorithms database databases code debugging python java javascript rust",
    ),
    (
        "010",
        "bibliography bibliographies bibliographic catalogue catalog citation citations",
    ),
    (
        "020",
        "library libraries librarian librarians librarianship cataloguing cataloging archive archives archivist metadata dewey",
    ),
    ("030", "encyclopedia encyclopedias almanac almanacs trivia"),
    (
        "050",
        "magazine magazines journal journals periodical periodicals serial serials",
    ),
    (
        "060",
        "association associations museum museums organization organizations membership foundation",
    ),
    (
        "070",
        "news newspaper newspapers journalism journalist journalists publishing publisher publishers editor editors reporter reporters press headline broadcast broadcasting",
    ),
    (
        "080",
        "quotation quotations quote quotes aphorism aphorisms",
    ),
    ("090", "manuscript manuscripts rare incunabula codex"),
    ("100", "philosophy philosophical philosopher philosophers"),
    (
        "110",
        "metaphysics metaphysical ontology existence cosmology",
    ),
    (
        "120",
        "epistemology knowledge truth belief certainty skepticism",
    ),
    (
        "130",
        "occult paranormal astrology ghost ghosts witchcraft magic psychic tarot supernatural horoscope",
    ),
    (
        "140",
        "existentialism idealism materialism rationalism empiricism pragmatism humanism",
    ),
    (
        "150",
        "psychology psychological psychologist psychologists mind behavior behaviour emotion emotions emotional memory perception cognitive personality anxiety motivation",
    ),
    (
        "160",
        "logic logical syllogism fallacy fallacies inference deduction induction",
    ),
    (
        "170",
        "ethics ethical moral morality virtue virtues vice duty conscience honesty dignity",
    ),
    (
        "180",
        "plato aristotle socrates confucius confucian stoic stoicism epicurus aquinas",
    ),
    (
        "190",
        "descartes kant hegel nietzsche hume locke spinoza leibniz sartre wittgenstein",
    ),
    (
        "200",
        "religion religions religious god gods faith sacred divine worship spiritual spirituality holy",
    ),
    ("210", "theology theological deism theism atheism atheist"),
    (
        "220",
        "bible biblical testament gospel gospels scripture scriptures psalm psalms genesis moses prophet prophets",
    ),
    (
        "230",
        "christianity christian christians jesus christ church churches salvation trinity",
    ),
    ("240", "prayer prayers devotion devotional"),
    (
        "250",
        "pastor pastors sermon sermons preaching parish monastery monasteries monk monks nun nuns clergy priest priests",
    ),
    (
        "260",
        "liturgy sacrament sacraments baptism mission missionary missionaries congregation",
    ),
    (
        "270",
        "reformation crusade crusades papacy pope popes heresy",
    ),
    (
        "280",
        "catholic catholics protestant protestants orthodox baptist methodist lutheran anglican presbyterian denomination denominations mormon",
    ),
    (
        "290",
        "islam muslim muslims quran koran hinduism hindu buddhism buddhist judaism jewish torah mythology myth myths shinto taoism sikh",
    ),
    (
        "300",
        "society social sociology sociological culture cultural community communities gender",
    ),
    (
        "306",
        "family families father fathers fatherhood mother mothers motherhood parent parents parenthood daughter daughters son sons marriage divorce sibling siblings",
    ),
    (
        "310",
        "statistics statistical census demographic demographics",
    ),
    (
        "320",
        "politics political politician politicians government governments democracy election elections vote voters parliament policy citizen citizens citizenship nationalism sovereignty",
    ),
    (
        "330",
        "economics economy economic economist market markets finance financial money bank banks banking investment investor investors price prices inflation labor labour employment unemployment wage wages income capital stock",
    ),
    (
        "340",
        "law laws legal court courts judge judges lawyer lawyers attorney statute legislation contract contracts constitution constitutional rights trial jury",
    ),
    (
        "350",
        "military army armies navy soldier soldiers weapon weapons defense defence administration bureaucracy",
    ),
    (
        "360",
        "crime crimes criminal criminals prison prisons poverty welfare charity insurance abuse homeless homelessness violence police refugee refugees",
    ),
    (
        "370",
        "education educational school schools student students teacher teachers teaching learning curriculum classroom university universities college pupil pupils",
    ),
    (
        "380",
        "commerce trade transportation transport railroad railway railways shipping postal telecommunication telephone telegraph export exports airline airlines retail freight",
    ),
    (
        "390",
        "custom customs etiquette folklore tradition traditions costume fashion wedding weddings holiday holidays festival festivals legend legends folk",
    ),
    (
        "400",
        "language languages grammar vocabulary translation translator",
    ),
    (
        "410",
        "linguistics linguistic phonetics phonology syntax semantics morphology dialect dialects bilingual",
    ),
    (
        "420",
        "english spelling punctuation idiom idioms dictionary",
    ),
    ("430", "german germanic deutsch"),
    ("440", "french"),
    ("450", "italian romanian"),
    ("460", "spanish portuguese galician"),
    ("470", "latin"),
    ("480", "greek"),
    (
        "490",
        "chinese japanese arabic russian hindi korean hebrew sanskrit",
    ),
    (
        "500",
        "science sciences scientific scientist scientists experiment experiments nature natural",
    ),
    (
        "510",
        "mathematics mathematical mathematician math algebra geometry calculus equation equations theorem theorems proof arithmetic probability",
    ),
    (
        "520",
        "astronomy astronomer astronomers planet planets star stars galaxy galaxies telescope orbit solar moon comet comets asteroid universe cosmos",
    ),
    (
        "530",
        "physics physicist physicists energy force quantum relativity particle particles electron electrons gravity motion mechanics thermodynamics magnetism velocity wave waves",
    ),
    (
        "540",
        "chemistry chemical chemicals chemist molecule molecules compound compounds element elements reaction reactions acid acids oxygen hydrogen carbon atom atoms atomic laboratory",
    ),
    (
        "550",
        "geology geological earth rock rocks mineral minerals volcano volcanoes earthquake earthquakes weather climate meteorology ocean oceans oceanography glacier glaciers sediment tectonic erosion",
    ),
    (
        "560",
        "fossil fossils dinosaur dinosaurs paleontology prehistoric extinct extinction jurassic",
    ),
    (
        "570",
        "biology biological biologist cell cells gene genes genetic genetics dna evolution organism organisms ecology ecosystem ecosystems species protein proteins bacteria microbe microbes",
    ),
    (
        "580",
        "plant plants botany botanical botanist tree trees flower flowers leaf leaves seed seeds forest forests photosynthesis fern ferns moss flora",
    ),
    (
        "590",
        "animal animals zoology zoologist bird birds fish fishes insect insects mammal mammals reptile reptiles wildlife fauna predator predators whale whales lion lions wolf wolves butterfly butterflies",
    ),
    (
        "600",
        "technology technologies technological invention inventions inventor innovation industrial",
    ),
    (
        "610",
        "medicine medical health disease diseases patient patients doctor doctors physician physicians hospital hospitals nurse nurses treatment therapy symptom symptoms drug drugs surgery cancer infection diagnosis clinical vaccine vaccines pharmacy nutrition",
    ),
    (
        "620",
        "engineering engineer engineers machine machines mechanical electrical electronics electronic engine engines motor motors circuit circuits vehicle vehicles automobile automobiles car cars aircraft aviation rocket rockets robot robots hydraulic",
    ),
    (
        "630",
        "agriculture agricultural farm farms farmer farmers farming crop crops harvest livestock cattle soil irrigation fertilizer plough plow tractor ranch dairy grain wheat corn",
    ),
    ("634", "orchard orchards fruit fruits forestry timber"),
    (
        "635",
        "garden gardens gardening vegetable vegetables lawn compost",
    ),
    (
        "636",
        "horse horses pony ponies mare mares stallion stallions foal foals colt colts saddle equine cattle sheep goat goats pig pigs poultry chicken chickens livestock breed breeds breeding dog dogs puppy puppies cat cats kitten kittens pet pets veterinary veterinarian stable stables hay pasture grazing",
    ),
    ("640", "home household households housekeeping sewing"),
    (
        "641",
        "food foods cooking cook recipe recipes kitchen meal meals bake baking ingredient ingredients cuisine",
    ),
    (
        "649",
        "parenting childcare toddler toddlers infant infants baby babies nursery upbringing",
    ),
    (
        "650",
        "management manager managers business businesses marketing advertising accounting office employee employees company companies corporate corporation leadership entrepreneur entrepreneurs startup sales customer customers brand",
    ),
    (
        "660",
        "brewing brewery beer fermentation plastic plastics polymer polymers biotechnology petroleum refinery explosive explosives soap dye dyes",
    ),
    (
        "670",
        "manufacturing manufacture factory factories textile textiles steel mill mills",
    ),
    (
        "680",
        "furniture carpentry woodworking leather shoe shoes printing bookbinding",
    ),
    (
        "690",
        "construction builder builders plumbing roof roofing brick bricks concrete masonry",
    ),
    (
        "700",
        "art arts artist artists artistic aesthetic aesthetics",
    ),
    ("710", "landscape landscapes zoning park parks"),
    (
        "720",
        "architecture architect architects architectural cathedral cathedrals facade castle castles",
    ),
    (
        "730",
        "sculpture sculptures sculptor ceramic ceramics pottery statue statues bronze metalwork coin coins carving",
    ),
    (
        "740",
        "drawing drawings design graphic illustration illustrations decorative craft crafts calligraphy cartoon cartoons comic comics embroidery knitting",
    ),
    (
        "750",
        "painting paintings painter painters canvas watercolor watercolour portrait portraits fresco",
    ),
    (
        "760",
        "printmaking engraving engravings etching etchings lithograph woodcut woodcuts",
    ),
    (
        "770",
        "photography photograph photographs photographer camera cameras lens",
    ),
    (
        "780",
        "music musical musician musicians song songs singer singers composer composers symphony orchestra opera melody guitar piano jazz album concert rhythm",
    ),
    (
        "790",
        "sport sports game games football soccer baseball basketball tennis golf olympic olympics athlete athletes team teams player players chess movie movies film films cinema theater theatre television entertainment recreation hobby hobbies fishing hunting riding equestrian",
    ),
    (
        "800",
        "literature literary novel novels poem poems poetry poet poets fiction writer writers story stories prose verse drama narrative",
    ),
    ("810", "twain hemingway faulkner whitman thoreau emerson"),
    (
        "820",
        "shakespeare dickens austen chaucer milton wordsworth",
    ),
    ("830", "goethe schiller kafka"),
    ("840", "moliere hugo balzac flaubert proust voltaire"),
    ("850", "dante petrarch boccaccio"),
    ("860", "cervantes quixote lorca neruda"),
    ("870", "virgil ovid horace cicero"),
    ("880", "homer iliad odyssey sophocles euripides aeschylus"),
    ("890", "tolstoy dostoevsky chekhov pushkin"),
    (
        "900",
        "history historical historian historians century centuries civilization civilizations empire empires dynasty war wars",
    ),
    (
        "910",
        "geography geographic travel traveler travellers tourism tourist tourists map maps journey voyage explorer explorers exploration expedition guidebook island islands",
    ),
    (
        "920",
        "biography biographies autobiography memoir memoirs genealogy ancestor ancestors",
    ),
    (
        "930",
        "ancient rome roman romans egypt egyptian pharaoh mesopotamia archaeology archaeological babylon antiquity",
    ),
    (
        "940",
        "europe european france germany britain england italy spain russia poland balkans balkan croatia croatian croat croats serbia serbian serb serbs yugoslavia bosnia dubrovnik dalmatian adriatic napoleon medieval nazi",
    ),
    (
        "950",
        "asia asian china japan india korea vietnam persia iran iraq israel ottoman",
    ),
    ("960", "africa african nigeria kenya ethiopia congo sahara"),
    ("970", "canada canadian mexico mexican colonial frontier"),
    (
        "980",
        "brazil argentina peru chile colombia venezuela andes",
    ),
    (
        "990",
        "australia australian zealand pacific polynesia antarctica arctic oceania hawaii",
    ),
];

struct Table {
    /// Normalized keyword → the entry codes it belongs to.
    index: HashMap<String, Vec<&'static str>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut index: HashMap<String, Vec<&'static str>> = HashMap::new();
        for (code, words) in KEYWORDS {
            for word in words.split_whitespace() {
                let codes = index.entry(singular(word)).or_default();
                if !codes.contains(code) {
                    codes.push(code);
                }
            }
        }
        Table { index }
    })
}

/// The division (`630`) of an entry code (`636`).
fn division(code: &str) -> String {
    format!("{}0", &code[..2])
}

/// Keyword classification: the division with the highest term-frequency score (a section
/// such as `636` when its keywords carry the division), the class (`600`) when the evidence
/// is spread over its divisions, `000` with low confidence when no keyword matched.
/// Confidence grows with the margin over the runner-up and with the amount of evidence.
pub fn classify_text(text: &str) -> Classification {
    let table = table();
    let tf = term_frequencies(text);
    // Entry scores: each occurrence of a keyword counts 1, shared between the divisions that
    // list it; a keyword listed by both a division and its section counts for the section.
    let mut entries: BTreeMap<&'static str, f64> = BTreeMap::new();
    for (term, count) in &tf {
        let Some(codes) = table.index.get(term) else {
            continue;
        };
        let mut divisions: Vec<String> = codes.iter().map(|c| division(c)).collect();
        divisions.sort();
        divisions.dedup();
        let share = *count as f64 / divisions.len() as f64;
        for div in &divisions {
            let in_div: Vec<&&str> = codes.iter().filter(|c| division(c) == *div).collect();
            let target = in_div
                .iter()
                .find(|c| !c.ends_with('0'))
                .copied()
                .unwrap_or(in_div[0]);
            *entries.entry(target).or_insert(0.0) += share;
        }
    }
    let mut divisions: BTreeMap<String, f64> = BTreeMap::new();
    let mut classes: BTreeMap<char, f64> = BTreeMap::new();
    for (code, score) in &entries {
        *divisions.entry(division(code)).or_insert(0.0) += score;
        *classes
            .entry(code.chars().next().unwrap_or('0'))
            .or_insert(0.0) += score;
    }
    let mut ranked: Vec<(&String, f64)> = divisions.iter().map(|(c, s)| (c, *s)).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let Some(&(best_division, best)) = ranked.first() else {
        return Classification {
            code: "000".into(),
            confidence: 0.05,
        };
    };
    if best < 1.5 {
        return Classification {
            code: "000".into(),
            confidence: 0.1,
        };
    }
    let runner_up = ranked.get(1).map_or(0.0, |r| r.1);
    let class_char = best_division.chars().next().unwrap_or('0');
    let class_score = classes.get(&class_char).copied().unwrap_or(best);
    // Within the division: the best section, if it carries at least half the division.
    let (section, section_score) = entries
        .iter()
        .filter(|(c, _)| division(c) == *best_division && !c.ends_with('0'))
        .max_by(|a, b| a.1.total_cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(c, s)| (Some(*c), *s))
        .unwrap_or((None, 0.0));
    let code = if best * 2.0 < class_score {
        format!("{class_char}00")
    } else if let Some(section) = section.filter(|_| section_score * 2.0 >= best) {
        section.to_string()
    } else {
        best_division.clone()
    };
    let margin = (best - runner_up) / best;
    let evidence = 1.0 - (-best / 6.0).exp();
    let confidence = (0.15 + 0.45 * margin * evidence + 0.3 * evidence).clamp(0.0, 0.9);
    Classification {
        code,
        confidence: (confidence * 100.0).round() / 100.0,
    }
}

// ---------------------------------------------------------------------------------------------
// Title, summary, tags

/// The extractive synopsis: title, summary, tags and stem.
pub fn synopsis(text: &str) -> Synopsis {
    let text = clean_text(text);
    let title = title(&text);
    let tf = term_frequencies(&text);
    let summary = summary(&text, &tf);
    let tags = tags(&text);
    Synopsis {
        suggested_stem: slug(&title),
        title,
        summary,
        tags,
    }
}

/// Real words rather than spaced-out letters (`d a t e l i n e`).
fn wordy(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    !words.is_empty() && words.iter().map(|w| w.chars().count()).sum::<usize>() >= words.len() * 2
}

/// Whether a line is a candidate title: short, with real words (not `d a t e l i n e`).
fn title_like(line: &str) -> bool {
    let letters = line.chars().filter(|c| c.is_alphabetic()).count();
    let words = line.split_whitespace().count();
    letters >= 3
        && line.chars().count() <= 100
        && !line.ends_with([',', ';', ':'])
        && letters * 10 >= line.chars().count() * 5
        && words <= 16
        && wordy(line)
}

/// The first Markdown heading, else the first short line, else the start of the first
/// sentence (at most 80 characters).
pub fn title(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("<!--") && !l.starts_with('|'))
        .collect();
    let heading = lines
        .iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| l.chars().any(char::is_alphabetic));
    let chosen = heading
        .map(str::to_string)
        .or_else(|| {
            lines
                .iter()
                .take(5)
                .find(|l| title_like(l))
                .map(|l| l.trim_start_matches(['-', '*', '>', ' ']).to_string())
        })
        .or_else(|| {
            sentences(text)
                .into_iter()
                .find(|s| wordy(&s.text))
                .map(|s| cut_at_word(&s.text, 80))
        })
        .unwrap_or_default();
    let chosen = chosen
        .trim()
        .trim_end_matches(['.', ',', ';', ':'])
        .trim()
        .to_string();
    if chosen.is_empty() {
        "Untitled document".to_string()
    } else {
        cut_at_word(&chosen, 120)
    }
}

/// At most `max` characters, cut at a word boundary.
fn cut_at_word(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out = String::new();
    for word in text.split_whitespace() {
        let extra = usize::from(!out.is_empty()) + word.chars().count();
        if out.chars().count() + extra > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        text.chars().take(max).collect()
    } else {
        out
    }
}

struct Sentence {
    text: String,
    position: usize,
}

/// Sentences of the prose (headings, tables and comments left out), whitespace collapsed.
/// Lines are boundaries too: cleaning has already rejoined the lines of a paragraph.
fn sentences(text: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty()
            || line.starts_with('#')
            || line.starts_with('|')
            || line.starts_with("<!--")
        {
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        let mut current = String::new();
        let mut i = 0;
        while i < chars.len() {
            current.push(chars[i]);
            if matches!(chars[i], '.' | '!' | '?') {
                while let Some(&c) = chars.get(i + 1).filter(|c| CLOSERS.contains(c)) {
                    current.push(c);
                    i += 1;
                }
                if chars.get(i + 1).is_none_or(|c| c.is_whitespace()) {
                    push_sentence(&mut out, &mut current);
                }
            }
            i += 1;
        }
        push_sentence(&mut out, &mut current);
    }
    out
}

/// Closing quotation marks and brackets that belong to the sentence before them.
const CLOSERS: &[char] = &['"', '\'', '\u{201D}', '\u{2019}', '\u{BB}', ')', ']'];

fn push_sentence(out: &mut Vec<Sentence>, current: &mut String) {
    let text = current.split_whitespace().collect::<Vec<_>>().join(" ");
    current.clear();
    if text.chars().filter(|c| c.is_alphabetic()).count() >= 3
        && !out.iter().any(|s: &Sentence| s.text == text)
    {
        out.push(Sentence {
            position: out.len(),
            text,
        });
    }
}

/// The top-scoring sentences by term frequency, in their original order, at most
/// [`SUMMARY_CHARS`] characters in all.
fn summary(text: &str, tf: &HashMap<String, usize>) -> String {
    let all = sentences(text);
    let mut scored: Vec<(f64, &Sentence)> = all
        .iter()
        .map(|s| {
            let terms: Vec<String> = words(&s.text)
                .filter(|w| w.chars().count() >= 2 && !is_stopword(w))
                .map(|w| singular(&w))
                .collect();
            let sum: usize = terms.iter().map(|t| tf.get(t).copied().unwrap_or(0)).sum();
            let score = if terms.len() < 3 {
                0.0
            } else {
                sum as f64 / (terms.len() as f64).sqrt()
            };
            (score, s)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.position.cmp(&b.1.position))
    });
    // Fragments with too few content words only fill in when nothing else scored.
    if scored.iter().any(|(score, _)| *score > 0.0) {
        scored.retain(|(score, _)| *score > 0.0);
    }
    let mut chosen: Vec<&Sentence> = Vec::new();
    let mut used = 0usize;
    for (_, sentence) in &scored {
        let len = sentence.text.chars().count() + usize::from(!chosen.is_empty());
        if used + len <= SUMMARY_CHARS {
            chosen.push(sentence);
            used += len;
        }
        if chosen.len() >= 4 {
            break;
        }
    }
    if chosen.is_empty() {
        return scored
            .first()
            .map(|(_, s)| {
                let mut cut = cut_at_word(&s.text, SUMMARY_CHARS - 1);
                cut.push('…');
                cut
            })
            .unwrap_or_default();
    }
    chosen.sort_by_key(|s| s.position);
    chosen
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The most frequent non-stopword terms (four letters or more), shown in their most common
/// spelling; ties go to the term seen first.
fn tags(text: &str) -> Vec<String> {
    struct Term {
        count: usize,
        first: usize,
        forms: BTreeMap<String, usize>,
    }
    let mut terms: HashMap<String, Term> = HashMap::new();
    for (position, word) in words(text).enumerate() {
        if word.chars().count() < 4 || is_stopword(&word) {
            continue;
        }
        let term = terms.entry(singular(&word)).or_insert(Term {
            count: 0,
            first: position,
            forms: BTreeMap::new(),
        });
        term.count += 1;
        *term.forms.entry(word).or_insert(0) += 1;
    }
    let mut ranked: Vec<&Term> = terms.values().collect();
    ranked.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.first.cmp(&b.first)));
    let repeated = ranked.iter().filter(|t| t.count >= 2).count();
    let take = if repeated >= 3 { repeated.min(6) } else { 3 };
    ranked
        .into_iter()
        .take(take)
        .filter_map(|t| {
            t.forms
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(form, _)| form.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{ChunkSettings, fidelity_problem, split};

    const HORSES: &str = "# Keeping Horses\n\n\
        Horses are large grazing animals that people have kept for riding, farm work and \
        transport for thousands of years. A healthy horse needs good pasture, clean hay and \
        fresh water every day. Horses live in herds, so a horse kept alone in a stable is \
        often unhappy.\n\n\
        Breeding horses takes patience: a mare carries her foal for about 11 months. Young \
        foals stay beside the mare for months. A veterinarian should check every horse \
        twice a year, and a farrier trims the hooves every 6 to 8 weeks.";

    fn corpus() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus/text");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn rejoins_wrapped_lines_and_broken_words() {
        let source = "  SHE MOPED. She sighed. She\n  wandered around the house\n  with the look of an injured\npuppy, sometimes bursting into\ntears. How could she ex-\nplain it to the Greco-\nRoman scholars?\n  \"I've never forgotten that mo-\nment,\" she says.";
        assert_eq!(
            clean_text(source),
            "SHE MOPED. She sighed. She wandered around the house with the look of an injured puppy, sometimes bursting into tears. How could she explain it to the Greco-Roman scholars?\n\n\"I've never forgotten that moment,\" she says."
        );
    }

    #[test]
    fn keeps_structure_and_layout() {
        let md = "### Table with options\n\n| **List** |\n| - |\n| Breakfast |\n\n- [x] Design\n- [ ] Documentation of the task with a very long text that goes beyond\n\n```\nfn  main()  {\n    x\n}\n```\nThe Crazy Ones\nOctober 14, 1998";
        let cleaned = clean_text(md);
        assert!(cleaned.contains("| **List** |\n| - |\n| Breakfast |"));
        assert!(cleaned.contains("- [x] Design\n- [ ] Documentation"));
        assert!(cleaned.contains("```\nfn  main()  {\n    x\n}\n```"));
        assert!(cleaned.ends_with("The Crazy Ones\nOctober 14, 1998"));
        assert_eq!(
            clean_text("ligature: ﬁne ﬂow\u{00A0}here"),
            "ligature: fine flow here"
        );
        assert_eq!(
            clean_text("see http://example.com/a-\nb and 1990-\n1995 please"),
            "see http://example.com/a- b and 1990-1995 please"
        );
    }

    #[test]
    fn cleaned_corpus_passes_the_fidelity_check() {
        for (name, text) in corpus() {
            for settings in [
                ChunkSettings::default(),
                ChunkSettings {
                    target_chars: 300,
                    overlap_chars: 50,
                },
            ] {
                for chunk in split(&text, settings) {
                    let cleaned = clean_text(&chunk.text);
                    assert_eq!(
                        fidelity_problem(&chunk.text, &cleaned),
                        None,
                        "{name} chunk {}",
                        chunk.index
                    );
                }
            }
            assert_eq!(clean_text(&text), clean_text(&text), "{name}");
        }
    }

    #[test]
    fn corpus_prose_is_rejoined() {
        let corpus = corpus();
        let (_, text) = corpus.iter().find(|(n, _)| n == "8071_093.3B.txt").unwrap();
        let cleaned = clean_text(text);
        assert!(
            cleaned
                .contains("How could she explain she was desperately in love for the first time")
        );
        assert!(cleaned.contains("Fathers bring a unique presence, a special strength"));
        let (_, text) = corpus.iter().find(|(n, _)| n == "phototest.txt").unwrap();
        assert!(clean_text(text).starts_with(
            "This is a lot of 12 point text to test the ocr code and see if it works on all types of file format."
        ));
    }

    #[test]
    fn horses_classify_under_agriculture() {
        let c = classify_text(HORSES);
        assert!(c.code == "636" || c.code == "630", "{c:?}");
        assert_eq!(c.code, "636");
        assert!(c.confidence >= 0.5, "{c:?}");
        assert_eq!(classify_text(HORSES), c);
    }

    #[test]
    fn corpus_texts_classify_sensibly() {
        let corpus = corpus();
        let get = |name: &str| &corpus.iter().find(|(n, _)| n == name).unwrap().1;
        let balkans = classify_text(get("8087_054.3B.txt"));
        assert_eq!(balkans.code, "940", "{balkans:?}");
        let fathers = classify_text(get("8071_093.3B.txt"));
        assert!(
            fathers.code.starts_with("30") || fathers.code.starts_with("64"),
            "{fathers:?}"
        );
        let nothing = classify_text(get("Strict.docx.md"));
        assert_eq!(nothing.code, "000");
        assert!(nothing.confidence <= 0.1);
        for (name, text) in &corpus {
            let c = classify_text(text);
            assert!(shelf_documents::dewey::is_valid_code(&c.code), "{name}");
            assert!((0.0..=1.0).contains(&c.confidence), "{name}");
        }
    }

    #[test]
    fn programming_and_cooking_find_their_sections() {
        let code = classify_text(
            "Programming in Python: the compiler, the software debugger and the algorithm. \
             Every programmer writes software; a database server stores the data.",
        );
        assert_eq!(code.code, "005");
        let food = classify_text(
            "A recipe for bread: the cook mixes the ingredients in the kitchen, then baking \
             takes an hour. Cooking good food for every meal.",
        );
        assert_eq!(food.code, "641");
    }

    #[test]
    fn synopsis_is_extractive() {
        let s = synopsis(HORSES);
        assert_eq!(s.title, "Keeping Horses");
        assert_eq!(s.suggested_stem, "keeping-horses");
        assert_eq!(s.tags[0], "horses");
        assert!(s.tags.contains(&"mare".to_string()) || s.tags.contains(&"foals".to_string()));
        assert!(s.summary.chars().count() <= SUMMARY_CHARS);
        assert!(!s.summary.is_empty());
        // Sentences appear in their original order.
        let sentences: Vec<&str> = s.summary.split(". ").collect();
        let positions: Vec<usize> = sentences
            .iter()
            .map(|p| {
                HORSES
                    .replace('\n', " ")
                    .find(&p[..20.min(p.len())])
                    .unwrap()
            })
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{}", s.summary);
    }

    #[test]
    fn corpus_synopses() {
        let corpus = corpus();
        let get = |name: &str| &corpus.iter().find(|(n, _)| n == name).unwrap().1;
        let crazy = synopsis(get("crazyones.txt"));
        assert_eq!(crazy.title, "The Crazy Ones");
        assert_eq!(crazy.suggested_stem, "the-crazy-ones");
        assert!(
            crazy.tags.contains(&"crazy".to_string()),
            "{:?}",
            crazy.tags
        );
        let lorem = synopsis(get("multicolumn-lorem-ipsum.txt"));
        assert_eq!(lorem.title, "Two-Column Document with Lorem Ipsum");
        let checkboxes = synopsis(get("docx_checkboxes.docx.md"));
        assert_eq!(checkboxes.title, "Table with options");
        let dateline = synopsis(get("8087_054.3B.txt"));
        assert_ne!(dateline.title, "d a t e l i n e");
        for (name, text) in &corpus {
            let s = synopsis(text);
            assert!(!s.title.is_empty(), "{name}");
            assert!(s.summary.chars().count() <= SUMMARY_CHARS, "{name}");
            assert_eq!(s.suggested_stem, slug(&s.title), "{name}");
            assert_eq!(synopsis(text), s, "{name}");
        }
        assert_eq!(synopsis("").title, "Untitled document");
    }

    #[tokio::test]
    async fn provider_calls_work() {
        let p = LocalProvider::new();
        assert_eq!(p.name(), "local");
        let cleaned = p
            .clean(CleanRequest {
                text: "a  b-\nc",
                context: "",
                prompt_version: "cmos_v4",
            })
            .await
            .unwrap();
        assert_eq!(cleaned, "a bc");
        assert_eq!(p.classify(HORSES, "dewey_v1").await.unwrap().code, "636");
        assert_eq!(p.summarize(HORSES).await.unwrap().title, "Keeping Horses");
        let corrected = p
            .correct(CorrectRequest {
                text: "The rnorning infor-\nmation",
                model: "",
            })
            .await
            .unwrap();
        assert_eq!(corrected, "The morning information");
        let clean_page = "Nothing here to fix, 1998.";
        let same = p
            .correct(CorrectRequest {
                text: clean_page,
                model: "ignored",
            })
            .await
            .unwrap();
        assert_eq!(
            same, clean_page,
            "an unchanged page tells the stage nothing was found"
        );
    }
}
