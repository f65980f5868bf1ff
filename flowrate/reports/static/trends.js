"use strict";
const trends = JSON.parse(document.getElementById("data").textContent);
document.title += " (" + trends.length + " points)";
