//! Texts the `local` provider's unit tests share: a short horse text and the vendored corpus
//! (`tests/corpus/text`, read by a path relative to the crate; a missing corpus fails).

pub(super) const HORSES: &str = "# Keeping Horses\n\n\
        Horses are large grazing animals that people have kept for riding, farm work and \
        transport for thousands of years. A healthy horse needs good pasture, clean hay and \
        fresh water every day. Horses live in herds, so a horse kept alone in a stable is \
        often unhappy.\n\n\
        Breeding horses takes patience: a mare carries her foal for about 11 months. Young \
        foals stay beside the mare for months. A veterinarian should check every horse \
        twice a year, and a farrier trims the hooves every 6 to 8 weeks.";

pub(super) fn corpus() -> Vec<(String, String)> {
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
