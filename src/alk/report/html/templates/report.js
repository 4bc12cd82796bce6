// Draws each chart from its JSON block. The page's one script besides Plotly's bundle: the
// page's Content-Security-Policy allows these two by their hashes and nothing else.
(function () {
  "use strict";
  var drawn = [];
  var plots = [];
  var blocks = document.querySelectorAll('script[type="application/json"][data-chart]');
  Array.prototype.forEach.call(blocks, function (block) {
    var target = document.getElementById(block.getAttribute("data-chart"));
    if (!target || typeof Plotly === "undefined") {
      return;
    }
    var spec = JSON.parse(block.textContent);
    var figure = spec.figure || {};
    plots.push(Plotly.newPlot(target, figure.data || [], figure.layout || {},
                              spec.config || {}));
    drawn.push(target);
  });
  // Said on the page once every chart is drawn: what a reader's tools (and the tests) wait for.
  Promise.all(plots).then(function () {
    document.documentElement.setAttribute("data-charts-drawn", String(drawn.length));
  });
  // Printed pages are narrower than the window: fit the charts to them, and back.
  function fit() {
    drawn.forEach(function (target) { Plotly.Plots.resize(target); });
  }
  window.addEventListener("beforeprint", fit);
  window.addEventListener("afterprint", fit);
})();
