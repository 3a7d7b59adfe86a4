// Shelf web UI: the few live parts of the pages (docs/web.md). Every page works without this
// file; it adds drag-and-drop upload with per-file progress on the Library page (then a run for
// each new document, as the no-JS `/ui/upload` page does), the live event
// log on the Run page, and confirmations on forms marked `data-confirm`. No library, no build,
// no eval, no inline handlers (the CSP forbids them), and no innerHTML: file names and server
// messages are untrusted, so every value goes in through textContent or setAttribute.
(function () {
  "use strict";

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function positiveInt(value, fallback) {
    var n = parseInt(value, 10);
    return isFinite(n) && n > 0 ? n : fallback;
  }

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  // ---- Confirmations: <form data-confirm="Delete this document?"> ----------------------------

  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-confirm")) return;
      if (!window.confirm(form.getAttribute("data-confirm") || "Are you sure?")) {
        event.preventDefault();
        event.stopImmediatePropagation();
      }
    },
    true
  );

  // ---- Library: upload by drop or file choice, in bounded batches -----------------------------

  function initUpload() {
    var form = document.getElementById("upload");
    var list = document.getElementById("upload-progress");
    if (!form || !list) return;
    var zone = document.getElementById("drop-zone");
    var filesInput = document.getElementById("upload-files");
    var folderInput = document.getElementById("upload-folder");
    var batchUrl = form.getAttribute("data-batch-url") || "/documents/batch";
    var runsUrl = form.getAttribute("data-runs-url") || "/runs";
    var maxFiles = positiveInt(form.getAttribute("data-max-files"), 100);
    var maxBytes = positiveInt(form.getAttribute("data-max-bytes"), 1073741824);
    var queue = []; // batches waiting: arrays of {file, name, item, progress}
    var busy = false;

    function addItem(name) {
      var item = el("li", "upload-item");
      item.setAttribute("data-name", name);
      item.appendChild(el("span", "name", name));
      item.appendChild(document.createTextNode(" "));
      var progress = el("progress");
      progress.max = 100;
      progress.value = 0;
      progress.setAttribute("aria-label", "Upload of " + name);
      item.appendChild(progress);
      list.appendChild(item);
      return { item: item, progress: progress, name: name };
    }

    function markFailed(entry, detail, code) {
      entry.item.classList.remove("ingested");
      entry.item.classList.add("failed");
      var reason = el("span", "reason", (detail || "Refused") + " (" + (code || "unknown") + ")");
      entry.item.appendChild(reason);
    }

    function markIngested(entry, doc) {
      entry.item.classList.add("ingested");
      entry.progress.value = 100;
      var nameSpan = entry.item.querySelector(".name");
      var link = el("a", null, entry.name);
      link.href = "/ui/documents/" + encodeURIComponent(String(doc.id));
      if (nameSpan) {
        nameSpan.textContent = "";
        nameSpan.appendChild(link);
      } else {
        entry.item.insertBefore(link, entry.item.firstChild);
      }
      if (doc.duplicate) entry.item.appendChild(el("span", "note", "already in the library"));
    }

    // Queues a run of the default pipeline for a document not processed before (a duplicate
    // that was processed already is not processed again), like `POST /ui/upload`.
    function startRun(entry, doc, callback) {
      if (doc.duplicate && doc.status !== "ingested") {
        callback();
        return;
      }
      var xhr = new XMLHttpRequest();
      xhr.addEventListener("loadend", function () {
        var body = parseJson(xhr.responseText);
        if (xhr.status === 201 && body && body.id) {
          entry.item.appendChild(document.createTextNode(" · "));
          var link = el("a", "run-link", "processing");
          link.href = "/ui/runs/" + encodeURIComponent(String(body.id));
          entry.item.appendChild(link);
        } else {
          var why = body && typeof body.detail === "string" ? body.detail + " (" + body.code + ")" : "the server answered " + xhr.status;
          entry.item.appendChild(el("span", "note", "stored, but processing did not start: " + why));
        }
        callback();
      });
      xhr.open("POST", runsUrl);
      xhr.setRequestHeader("Content-Type", "application/json");
      xhr.setRequestHeader("Accept", "application/json");
      xhr.send(JSON.stringify({ document_id: String(doc.id) }));
    }

    // Splits files into batches of at most maxFiles files and maxBytes bytes; a file larger
    // than maxBytes goes alone, and the server's refusal names the limit.
    function enqueue(files) {
      if (!files.length) {
        // Nothing readable was dropped; still sum up if unreadable entries were listed.
        if (!busy && !queue.length && list.children.length) finish();
        return;
      }
      var done = document.getElementById("upload-done");
      if (done) done.parentNode.removeChild(done);
      var batch = [];
      var bytes = 0;
      files.forEach(function (file) {
        var size = file.size || 0;
        if (batch.length && (batch.length >= maxFiles || bytes + size > maxBytes)) {
          queue.push(batch);
          batch = [];
          bytes = 0;
        }
        var entry = addItem(file.name);
        entry.file = file;
        entry.size = size;
        batch.push(entry);
        bytes += size;
      });
      if (batch.length) queue.push(batch);
      next();
    }

    function next() {
      if (busy) return;
      var batch = queue.shift();
      if (!batch) {
        finish();
        return;
      }
      busy = true;
      send(batch, function () {
        busy = false;
        next();
      });
    }

    function finish() {
      var previous = document.getElementById("upload-done");
      if (previous) previous.parentNode.removeChild(previous);
      var ok = list.querySelectorAll(".upload-item.ingested").length;
      var refused = list.querySelectorAll(".upload-item.failed").length;
      var done = el("p");
      done.id = "upload-done";
      done.appendChild(document.createTextNode(ok + " uploaded, " + refused + " refused. "));
      var refresh = el("a", null, "Refresh the library");
      refresh.href = "/ui/";
      done.appendChild(refresh);
      list.parentNode.insertBefore(done, list.nextSibling);
    }

    function send(batch, callback) {
      var data = new FormData();
      var total = 0;
      batch.forEach(function (entry) {
        data.append("files", entry.file, entry.name);
        entry.start = total;
        total += entry.size;
      });
      var xhr = new XMLHttpRequest();
      var finished = false;
      function failAll(detail, code) {
        batch.forEach(function (entry) {
          markFailed(entry, detail, code);
        });
      }
      function end() {
        if (finished) return;
        finished = true;
        callback();
      }
      xhr.upload.addEventListener("progress", function (event) {
        if (!event.lengthComputable || !event.total) return;
        // The request body is the files plus multipart headers; spread the sent fraction over
        // the files by their cumulative sizes.
        var sent = (event.loaded / event.total) * total;
        batch.forEach(function (entry) {
          var pct = entry.size ? ((sent - entry.start) / entry.size) * 100 : sent >= entry.start ? 100 : 0;
          entry.progress.value = Math.max(0, Math.min(100, Math.floor(pct)));
        });
      });
      xhr.upload.addEventListener("load", function () {
        batch.forEach(function (entry) {
          entry.progress.value = 100;
        });
      });
      xhr.addEventListener("load", function () {
        var body = parseJson(xhr.responseText);
        if (xhr.status !== 200 || !body || !Array.isArray(body.documents)) {
          if (body && typeof body.detail === "string") {
            failAll(body.detail, body.code);
          } else {
            failAll("The server answered " + xhr.status + " " + (xhr.statusText || ""), "http_" + xhr.status);
          }
          end();
          return;
        }
        var stored = [];
        batch.forEach(function (entry, i) {
          var out = body.documents[i];
          if (out && out.status === "ingested" && out.document && out.document.id) {
            markIngested(entry, out.document);
            stored.push([entry, out.document]);
          } else if (out && out.error) {
            markFailed(entry, out.error.detail, out.error.code);
          } else {
            markFailed(entry, "The server did not answer for this file", "no_answer");
          }
        });
        (function runNext() {
          var pair = stored.shift();
          if (pair) startRun(pair[0], pair[1], runNext);
          else end();
        })();
      });
      xhr.addEventListener("error", function () {
        failAll("The upload did not reach the server", "network_error");
        end();
      });
      xhr.addEventListener("abort", function () {
        failAll("The upload was stopped", "aborted");
        end();
      });
      xhr.open("POST", batchUrl);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.send(data);
    }

    // Reads a dropped file or folder tree into a flat list (folders sorted by name, so an
    // upload's order does not depend on the file system).
    function readEntry(entry) {
      if (entry.isFile) {
        return new Promise(function (resolve) {
          entry.file(
            function (file) {
              resolve([file]);
            },
            function () {
              var failed = addItem(entry.name);
              markFailed(failed, "This file could not be read", "unreadable");
              resolve([]);
            }
          );
        });
      }
      if (entry.isDirectory) {
        return readDirectory(entry).then(function (children) {
          children.sort(function (a, b) {
            return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
          });
          return Promise.all(children.map(readEntry)).then(flatten);
        });
      }
      return Promise.resolve([]);
    }

    // readEntries answers in batches (about 100 in Chromium): call it until it answers empty.
    function readDirectory(dir) {
      var reader = dir.createReader();
      var all = [];
      return new Promise(function (resolve) {
        function more() {
          reader.readEntries(
            function (entries) {
              if (!entries.length) {
                resolve(all);
                return;
              }
              for (var i = 0; i < entries.length; i++) all.push(entries[i]);
              more();
            },
            function () {
              var failed = addItem(dir.name + "/");
              markFailed(failed, "This folder could not be read", "unreadable");
              resolve(all);
            }
          );
        }
        more();
      });
    }

    function flatten(lists) {
      return lists.reduce(function (acc, l) {
        return acc.concat(l);
      }, []);
    }

    function onDrop(event) {
      var transfer = event.dataTransfer;
      if (!transfer) return;
      var items = transfer.items;
      // Entries must be taken during the event: the DataTransfer is emptied after it.
      if (items && items.length && typeof items[0].webkitGetAsEntry === "function") {
        var roots = [];
        for (var i = 0; i < items.length; i++) {
          if (items[i].kind !== "file") continue;
          var entry = items[i].webkitGetAsEntry();
          if (entry) {
            roots.push(readEntry(entry));
          } else {
            var file = items[i].getAsFile();
            if (file) roots.push(Promise.resolve([file]));
          }
        }
        Promise.all(roots).then(function (lists) {
          enqueue(flatten(lists));
        });
      } else if (transfer.files) {
        enqueue(Array.prototype.slice.call(transfer.files));
      }
    }

    if (zone) {
      var depth = 0;
      zone.addEventListener("dragenter", function (event) {
        event.preventDefault();
        depth++;
        zone.classList.add("dragover");
      });
      zone.addEventListener("dragover", function (event) {
        event.preventDefault();
        if (event.dataTransfer) event.dataTransfer.dropEffect = "copy";
        zone.classList.add("dragover");
      });
      zone.addEventListener("dragleave", function () {
        depth = Math.max(0, depth - 1);
        if (!depth) zone.classList.remove("dragover");
      });
      zone.addEventListener("drop", function (event) {
        event.preventDefault();
        event.stopPropagation();
        depth = 0;
        zone.classList.remove("dragover");
        onDrop(event);
      });
      // The drop zone is focusable: Enter or Space on the zone itself (not on the controls
      // inside it, whose keys must keep working) opens the file chooser.
      zone.addEventListener("keydown", function (event) {
        if (event.target === zone && (event.key === "Enter" || event.key === " ") && filesInput) {
          event.preventDefault();
          filesInput.click();
        }
      });
    }
    // A file dropped beside the zone must not replace the page with the file.
    document.addEventListener("dragover", function (event) {
      event.preventDefault();
    });
    document.addEventListener("drop", function (event) {
      event.preventDefault();
    });

    function takeInput(input) {
      var files = Array.prototype.slice.call(input.files || []);
      // Cleared so the same choice can be made again and the form never sends it twice.
      input.value = "";
      enqueue(files);
    }
    [filesInput, folderInput].forEach(function (input) {
      if (!input) return;
      input.addEventListener("change", function () {
        takeInput(input);
      });
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var chosen = 0;
      [filesInput, folderInput].forEach(function (input) {
        if (input && input.files && input.files.length) {
          chosen += input.files.length;
          takeInput(input);
        }
      });
      if (!chosen && filesInput) filesInput.focus();
    });
  }

  // ---- Run: the event log, live -------------------------------------------------------------

  function initRun() {
    var section = document.getElementById("run");
    if (!section) return;
    var runId = section.getAttribute("data-run-id") || "";
    var reloadKey = "shelf-run-reloaded:" + runId;
    var status = section.getAttribute("data-status");
    if (status !== "queued" && status !== "running") {
      forget(reloadKey);
      return;
    }
    var url = section.getAttribute("data-events-url");
    if (!url || typeof window.EventSource !== "function") return;
    var lastSeq = parseInt(section.getAttribute("data-last-seq"), 10) || 0;
    var live = document.getElementById("live");
    var list = document.getElementById("events");
    if (!list) {
      list = el("ol");
      list.id = "events";
      section.appendChild(list);
    }
    var seen = {};
    Array.prototype.forEach.call(list.querySelectorAll("li[data-seq]"), function (li) {
      seen[li.getAttribute("data-seq")] = true;
    });

    function say(text) {
      if (live) live.textContent = text;
    }

    function append(record) {
      var seq = Number(record.sequence);
      if (!isFinite(seq) || seq <= lastSeq || seen[String(seq)]) return;
      seen[String(seq)] = true;
      var li = el("li");
      li.setAttribute("data-seq", String(seq));
      // Shown as the server shows it: "2025-11-26 07:00:01 UTC".
      var created = String(record.created_at || "");
      var time = el("time", null, created.length >= 19 ? created.slice(0, 19).replace("T", " ") + " UTC" : created);
      time.setAttribute("datetime", created);
      li.appendChild(time);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "stage", record.stage || ""));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", "kind", record.kind || ""));
      li.appendChild(document.createTextNode(" " + (record.message || "")));
      // Keep sequence order even if a reconnect replays out of order.
      var after = null;
      var items = list.querySelectorAll("li[data-seq]");
      for (var i = items.length - 1; i >= 0; i--) {
        if (Number(items[i].getAttribute("data-seq")) < seq) break;
        after = items[i];
      }
      list.insertBefore(li, after);
    }

    var source = new EventSource(url);
    source.addEventListener("open", function () {
      say("Following live…");
    });
    source.addEventListener("run-event", function (event) {
      var record = parseJson(event.data);
      if (record) append(record);
    });
    source.addEventListener("done", function (event) {
      var data = parseJson(event.data) || {};
      source.close();
      var final = typeof data.status === "string" ? data.status : "";
      if (final) {
        var badge = document.getElementById("run-status");
        if (badge) {
          badge.textContent = final;
          badge.className = "status status-" + final;
        }
        section.setAttribute("data-status", final);
      }
      say("Run " + (final || "finished") + ".");
      // One reload for the final stages and timings. If the reloaded page still shows the run
      // live (a stale read), do not reload again: the badge is already right.
      if (remember(reloadKey)) window.location.reload();
    });
    source.addEventListener("error", function (event) {
      // A server `event: error` carries {detail, code}; a dropped connection carries nothing.
      var body = event && typeof event.data === "string" ? parseJson(event.data) : null;
      if (body && body.code === "not_found") {
        source.close();
        say("Live updates stopped: " + (body.detail || "not found") + " (" + body.code + ")");
        return;
      }
      if (source.readyState === EventSource.CLOSED) {
        say("Live updates stopped; reload the page to try again.");
      } else {
        say("Reconnecting…");
      }
    });
  }

  // sessionStorage holds only this reload marker (never a key or anything secret).
  function remember(key) {
    try {
      if (window.sessionStorage.getItem(key)) {
        window.sessionStorage.removeItem(key);
        return false;
      }
      window.sessionStorage.setItem(key, "1");
    } catch (e) {
      // Storage refused (private mode): reload anyway; a terminal page will not come back here.
    }
    return true;
  }

  function forget(key) {
    try {
      window.sessionStorage.removeItem(key);
    } catch (e) {
      /* nothing to forget */
    }
  }

  function init() {
    initUpload();
    initRun();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
