//! The keyword table of the `local` provider's classifier: plain words per Dewey division
//! (`x_0`) and for a few common sections (`636`, `641`, ...). Data only; `classify` reads it.

/// Keywords per Dewey division (`x_0`) and for a few common sections (`636`, `641`, ...).
/// Written as plain words; they are put in singular form when the table is built.
pub(super) const KEYWORDS: &[(&str, &str)] = &[
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
